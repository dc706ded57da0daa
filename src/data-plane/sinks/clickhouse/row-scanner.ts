import type { ColumnSpec } from '../../../catalogue/types.ts';
import { skipLeaf, skipValue } from './json-scan.ts';

// The generated scanner of one column set: it walks an envelope's text, descending only into the
// objects on the columns' paths and notes where each column's value lies (see row-encoder.ts for
// when it may and when the slow path takes over).

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

// A name that means something on a plain object or array (`constructor`, `length`, `__proto__`)
// reads differently from a parsed object than from the text: such columns take the slow path.
function plainName(name: string): boolean {
  return IDENTIFIER.test(name) && !(name in Object.prototype) && !(name in Array.prototype);
}

interface TrieNode {
  id: number;
  children: Map<string, TrieNode>;
  /** The column whose value this is (a leaf), or -1 for an object on the way. */
  column: number;
}

/** The path trie of the columns, or undefined when the scanner cannot serve this column set. */
function pathTrie(columns: readonly ColumnSpec[]): TrieNode[] | undefined {
  const nodes: TrieNode[] = [{ id: 0, children: new Map(), column: -1 }];
  const names = new Set<string>();
  for (const [i, column] of columns.entries()) {
    if (!plainName(column.name) || names.has(column.name) || column.path.length === 0) return;
    names.add(column.name);
    let node = nodes[0];
    for (const key of column.path) {
      if (!plainName(key) || node.column >= 0) return; // a leaf cannot also be a way through
      let next = node.children.get(key);
      if (next === undefined) {
        next = { id: nodes.length, children: new Map(), column: -1 };
        nodes.push(next);
        node.children.set(key, next);
      }
      node = next;
    }
    if (node.column >= 0 || node.children.size > 0) return;
    node.column = i;
  }
  return nodes;
}

// One function per object on the columns' paths: reads its keys, descends into the objects on a
// path, notes where each column's value lies (at[2i] to at[2i+1]) and skips the rest. Keys are
// first tried in column order (the order the envelope is written in: one startsWith each), then
// looked up by name; a key on a path seen twice gives up (JSON.parse would keep the last).
function objectScanner(node: TrieNode): string {
  const expected: string[] = [];
  const byName: string[] = [];
  const handle: string[] = [];
  let k = 0;
  for (const [key, child] of node.children) {
    const mask = `m${k >> 5}`;
    const flag = `${(1 << (k & 31)) >>> 0}`;
    const value =
      child.column >= 0
        ? `at[${2 * child.column}] = p; p = s.charCodeAt(p) === 34 ? s.indexOf('"', p + 1) + 1 || -1 : skipLeaf(s, p); at[${2 * child.column + 1}] = p;`
        : `p = s.charCodeAt(p) === 123 ? o${child.id}(s, p) : skipValue(s, p, 1);`;
    expected.push(`'"${key}":'`);
    byName.push(`case '${key}': k = ${k}; break;`);
    handle.push(
      `case ${k}: if ((${mask} & ${flag}) !== 0) return -1; ${mask} |= ${flag}; ${value} break;`,
    );
    k++;
  }
  const masks = Array.from({ length: Math.ceil(k / 32) }, (_, i) => `m${i} = 0`);
  return `  const q${node.id} = [${expected.join(', ')}];
  function o${node.id}(s, p) {
    let c = s.charCodeAt(++p);
    if (c === 125) return p + 1;
    let ${masks.join(', ')}, j = 0, k;
    for (;;) {
      if (j < ${k} && s.startsWith(q${node.id}[j], p)) {
        k = j;
        p += q${node.id}[j].length;
      } else {
        if (c !== 34) return -1;
        const e = s.indexOf('"', p + 1);
        if (e < 0 || s.charCodeAt(e + 1) !== 58) return -1;
        switch (s.slice(p + 1, e)) {
          ${byName.join('\n          ')}
          default: k = -1;
        }
        p = e + 2;
      }
      switch (k) {
        ${handle.join('\n        ')}
        default: p = skipValue(s, p, 1);
      }
      if (p < 0) return -1;
      if (k >= 0) j = k + 1;
      c = s.charCodeAt(p);
      if (c === 44) { c = s.charCodeAt(++p); continue; }
      return c === 125 ? p + 1 : -1;
    }
  }`;
}

export type Scanner = {
  /** Where column i's value lies in the last envelope scanned: at[2i] to at[2i+1], or -1. */
  at: Int32Array;
  /** Scans an envelope from the top (o0); false to give up. */
  scan(s: string): boolean;
};

/** The scanner of a column set, or undefined when its paths cannot be scanned this way. */
export function compileScanner(columns: readonly ColumnSpec[]): Scanner | undefined {
  const nodes = pathTrie(columns);
  if (nodes === undefined) return undefined;
  const objects = nodes.filter((n) => n.children.size > 0).map(objectScanner);
  const source = `
  const { skipValue, skipLeaf } = h;
  const at = new Int32Array(${2 * columns.length});
${objects.join('\n')}
  function scan(s) {
    at.fill(-1);
    return s.charCodeAt(0) === 123 && o0(s, 0) === s.length;
  }
  return { at, scan };`;
  return new Function('h', source)({ skipValue, skipLeaf }) as Scanner;
}
