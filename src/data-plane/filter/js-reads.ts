import type { VariableKind } from './cel-environment.ts';
import { isIdentifier } from './generated-code.ts';
import { type Leaf, unsupported } from './js-translator.ts';

// The prologue of a generated filter: it reads the event JSON as filter-environment.ts's
// toContext does (compile-js.ts's header says how), binding each leaf the expression uses to a
// local the translator's code refers to.

export interface GroupTree {
  groups: Map<string, GroupTree>;
  leaves: Map<string, Leaf>;
}

/** The filterable leaves as the environment's views nest them (filter-environment.ts). */
export function groupTree(leaves: Iterable<Leaf>): GroupTree {
  const root: GroupTree = { groups: new Map(), leaves: new Map() };
  for (const leaf of leaves) {
    let node = root;
    for (const key of leaf.path.slice(0, -1)) {
      let child = node.groups.get(key);
      if (!child) {
        child = { groups: new Map(), leaves: new Map() };
        node.groups.set(key, child);
      }
      node = child;
    }
    node.leaves.set(leaf.path[leaf.path.length - 1], leaf);
  }
  return root;
}

const isInt = (kind: VariableKind) => kind === 'int32' || kind === 'int64';

/**
 * The reads at the top of the generated function: every group (a non-object reads as empty),
 * each leaf the expression uses converted as toContext converts it, and every int leaf checked
 * for the infinity that makes toContext throw.
 */
export function reads(tree: GroupTree, used: ReadonlyMap<string, string>): string[] {
  const lines: string[] = [];
  let groups = 0;
  const walk = (node: GroupTree, object: string): void => {
    for (const [key, leaf] of node.leaves) {
      if (!isIdentifier(key)) unsupported(`field name ${key}`);
      const local = used.get(leaf.name);
      if (local === undefined) {
        // Unread: only an infinite int matters (Math.trunc keeps it infinite, BigInt throws).
        if (!isInt(leaf.kind)) continue;
        const v = `u${lines.length}`;
        lines.push(
          `const ${v} = ${object}.${key}; if (${v} === Infinity || ${v} === -Infinity) return false;`,
        );
        continue;
      }
      const v = local;
      const read = `let ${v} = ${object}.${key};`;
      if (isInt(leaf.kind)) {
        lines.push(
          `${read} if (typeof ${v} === 'number') { if (!Number.isSafeInteger(${v})) { ${v} = Math.trunc(${v}) || 0; if (${v} === Infinity || ${v} === -Infinity) return false; } } else if (typeof ${v} !== 'bigint') ${v} = 0;`,
        );
      } else if (leaf.kind === 'string') {
        lines.push(`${read} if (typeof ${v} !== 'string') ${v} = '';`);
      } else if (leaf.kind === 'bool') {
        lines.push(`${read} ${v} = ${v} === true;`);
      } else {
        unsupported(`leaf of kind ${leaf.kind}`);
      }
    }
    for (const [key, child] of node.groups) {
      if (!isIdentifier(key)) unsupported(`group name ${key}`);
      const g = `g${++groups}`;
      lines.push(
        `let ${g} = ${object}.${key}; if (${g} === null || typeof ${g} !== 'object') ${g} = none;`,
      );
      walk(child, g);
    }
  };
  lines.push(`const g0 = e !== null && typeof e === 'object' ? e : none;`);
  walk(tree, 'g0');
  return lines;
}
