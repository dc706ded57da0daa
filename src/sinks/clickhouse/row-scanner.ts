import { parseExact } from '../../catalogue/int64-json.ts';
import type { ColumnSpec } from '../../catalogue/types.ts';
import { skipLeaf, skipValue } from './json-scan.ts';
import { columnValue, int64, int64Number, timestamp } from './row-values.ts';
import type { ServerProfile } from './schema.ts';

// The generated scanner of one column set: it walks an envelope's text, descending only into the
// objects on the columns' paths, notes where each column's value lies and builds the row from
// those slices (see row-encoder.ts for when it may and when the slow path takes over).

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

// The statements that set column i's value on the row (r). Locals: a (start), b (end), c (first
// char code), x (scratch). Common value types are converted inline; any other goes to the generic
// mapping of the parsed value (g).
function columnCode(column: ColumnSpec, i: number, modern: boolean): string {
  const put = (expr: string) => `r.${column.name} = ${expr};`;
  const raw = 's.slice(a, b)';
  const content = 's.slice(a + 1, b - 1)';
  const generic = `x = g(${i}, ${raw}); if (x !== undefined) { ${put('x')} }`;
  const isNumber = '(c === 45 || (c >= 48 && c <= 57))';
  let fast: string;
  switch (column.kind) {
    case 'string':
      fast = `if (c === 34) { ${put(content)} }`;
      break;
    case 'int64':
      fast = `if (${isNumber}) { ${put(`int64Number(${raw})`)} } else if (c === 34) { x = int64(${content}); if (x !== undefined) { ${put('x')} } }`;
      break;
    case 'int32':
      fast = `if (${isNumber}) { ${put(`Number(${raw})`)} }`;
      break;
    case 'bool':
      fast = `if (c === 116) { ${put('1')} } else if (c === 102) { ${put('0')} }`;
      break;
    case 'timestamp':
      fast = `if (c === 34) { x = ts(${content}); if (x !== undefined) { ${put('x')} } }`;
      break;
    case 'string_list_map':
      fast = `if (c === 123) { ${put(modern ? `parseExact(${raw})` : raw)} }`;
      break;
    case 'json':
      fast = `if (c === 123 || c === 91) { ${put(raw)} }`;
      break;
    case 'string_list':
      fast = ''; // rare (no traffic column has it): always the generic mapping
      break;
  }
  const other = `if (c !== 110) { ${generic} }`; // 110: null, left out
  return `    a = at[${2 * i}];
    if (a >= 0) {
      b = at[${2 * i + 1}]; c = s.charCodeAt(a);
      ${fast ? `${fast} else ${other}` : other}
    }`;
}

type Helpers = {
  skipValue: typeof skipValue;
  skipLeaf: typeof skipLeaf;
  int64: typeof int64;
  int64Number: typeof int64Number;
  parseExact: typeof parseExact;
  ts: (v: string) => string | undefined;
  g: (i: number, raw: string) => unknown;
};

export type Scanner = {
  /** Where column i's value lies in the last envelope scanned: at[2i] to at[2i+1], or -1. */
  at: Int32Array;
  /** Scans an envelope from the top (o0); false to give up. */
  scan(s: string): boolean;
  /** The row of the envelope last scanned (or matched to a layout). */
  object(s: string): Record<string, unknown>;
};

export function compileScanner(
  columns: readonly ColumnSpec[],
  profile: ServerProfile,
): Scanner | undefined {
  const nodes = pathTrie(columns);
  if (nodes === undefined) return undefined;
  const objects = nodes.filter((n) => n.children.size > 0).map(objectScanner);
  const objectCode = columns.map((c, i) => columnCode(c, i, profile.modern));
  const source = `
  const { skipValue, skipLeaf, int64, int64Number, parseExact, ts } = h;
  const at = new Int32Array(${2 * columns.length});
${objects.join('\n')}
  function scan(s) {
    at.fill(-1);
    return s.charCodeAt(0) === 123 && o0(s, 0) === s.length;
  }
  function object(s) {
    const g = h.g;
    const r = {};
    let a, b, c, x;
${objectCode.join('\n')}
    return r;
  }
  return { at, scan, object };`;
  const helpers: Helpers = {
    skipValue,
    skipLeaf,
    int64,
    int64Number,
    parseExact,
    ts: (v) => timestamp(v, profile),
    g: (i, raw) => columnValue(columns[i], parseExact(raw), profile),
  };
  return new Function('h', source)(helpers) as Scanner;
}
