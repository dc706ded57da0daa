import { exactNumber, isRawJson, parseExact } from '../../catalogue/int64-json.ts';
import type { ColumnSpec } from '../../catalogue/types.ts';
import type { ServerProfile } from './schema.ts';

// One table's row encoder, generated once per (columns, server profile). It turns a record's
// envelope JSON into the table's JSONEachRow row: as an object (what @clickhouse/client
// stringifies) or directly as the row's text line.
//
// Fast path: no JSON.parse. A generated scanner walks the envelope text, descending only into the
// objects on the columns' paths (constant keys per level) and noting where each column's value
// starts and ends; everything else is checked to be well formed and skipped. Once an envelope has
// been read, its layout (the text between the column values) is remembered: the next envelopes of
// that layout are read with one startsWith per value. Strings are taken as raw slices, which is
// exact because the fast path only takes text whose strings need no unescaping (no backslash, no
// control character, no surrogate: one native regex test per record). A container value written
// out whole (a header map, a JSON column) is copied as text too, so it must be exactly what
// JSON.stringify(JSON.parse(slice)) would give: no whitespace, numbers in their shortest form, no
// integer-like key (JSON.parse moves those first), no repeated key.
//
// Anything else (escapes, whitespace, a repeated key on a column's path, malformed JSON) makes the
// scanner give up, and the record takes the slow path: JSON.parse (parseExact: integers beyond 2^53
// keep their digits) and the generic column mapping
// below (the reference semantics, which the fast path reproduces byte for byte, and JSON.parse's
// own error for bad JSON). A value of a type the generated code does not expect for its column is
// parsed alone and given to the same generic mapping. Column sets the scanner cannot serve (a
// column whose path is a prefix of another's, such as the audit table's whole `object` next to
// `object.id`; a name that is not a plain identifier) always take the slow path.
//
// Measured on batches of 2,000 generated http/tcp envelopes (2.5 MiB): JSON.parse was about three
// quarters of the old encoder's time (mostly building the header maps: each has its own key order,
// so V8 makes new hidden classes), the generic mapping the rest; the fast path takes under 40% of
// the old total.

const RFC3339 = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z$/;

function two(n: number): string {
  return String(n).padStart(2, '0');
}

/** Formats in UTC as the column expects: seconds on legacy DateTime, milliseconds on DateTime64(3). */
function timestamp(value: unknown, profile: ServerProfile): string | undefined {
  if (typeof value === 'string') {
    const m = RFC3339.exec(value);
    if (m) {
      if (!profile.modern) return `${m[1]} ${m[2]}`;
      return `${m[1]} ${m[2]}.${(m[3] ?? '').padEnd(3, '0').slice(0, 3)}`;
    }
  }
  const ms =
    typeof value === 'number' ? value : typeof value === 'string' ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) return undefined;
  const d = new Date(ms);
  const date = `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`;
  const time = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
  return profile.modern
    ? `${date} ${time}.${String(d.getUTCMilliseconds()).padStart(3, '0')}`
    : `${date} ${time}`;
}

/**
 * Proto JSON writes int64 as a string; a safe integer becomes a number, a larger one stays a
 * string (ClickHouse parses quoted integers exactly, a JS number would lose digits). The
 * envelope's own large integers arrive as raw JSON (parseExact) and become that string too.
 */
function int64(value: unknown): number | string | undefined {
  if (typeof value === 'number') return Math.trunc(value);
  if (isRawJson(value)) return value.rawJSON;
  if (typeof value === 'string' && /^-?\d+$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : value;
  }
  return undefined;
}

/** Converts one envelope value to what JSONEachRow expects for the column's kind and server. */
export function columnValue(column: ColumnSpec, value: unknown, profile: ServerProfile): unknown {
  if (value === undefined || value === null) return undefined;
  switch (column.kind) {
    case 'string':
      return typeof value === 'string' ? value : JSON.stringify(value);
    case 'int64':
      return int64(value);
    case 'int32':
      // An int32 column holds no integer beyond 2^53: such a value is read as a double.
      if (isRawJson(value)) return Number(value.rawJSON);
      return typeof value === 'number' ? value : int64(value);
    case 'bool':
      return value === true || value === 'true' ? 1 : 0;
    case 'timestamp':
      return timestamp(value, profile);
    case 'string_list_map':
      return profile.modern ? value : JSON.stringify(value);
    case 'json':
      return JSON.stringify(value);
    case 'string_list':
      return Array.isArray(value)
        ? value.map((v) => (isRawJson(v) ? v.rawJSON : String(v)))
        : undefined;
  }
}

/** An int64 column's JSON number text as the generic mapping has it, without a JSON.parse. */
function int64Number(raw: string): number | string {
  const n = Number(raw);
  if (Number.isSafeInteger(n)) return n;
  const exact = exactNumber(raw, n);
  return typeof exact === 'number' ? Math.trunc(exact) : exact.rawJSON;
}

/** The value at `path` in a parsed document (undefined past a non-object). */
function pick(doc: unknown, path: readonly string[]): unknown {
  let v = doc;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/** The generic mapping of a parsed envelope to a row: a column whose value is absent is left out. */
function rowOf(
  doc: unknown,
  columns: readonly ColumnSpec[],
  profile: ServerProfile,
): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (const column of columns) {
    const value = columnValue(column, pick(doc, column.path), profile);
    if (value !== undefined) row[column.name] = value;
  }
  return row;
}

/** Encodes envelopes (a record's `json`) into one table's rows; throws JSON.parse's error on bad JSON. */
export interface RowEncoder {
  /** The row as an object, for a JSONEachRow insert of values. */
  object(json: string): Record<string, unknown>;
  /** The row as its JSONEachRow line (JSON.stringify of the object, plus '\n'). */
  text(json: string): string;
}

// ---------------------------------------------------------------------------------------------
// Validating skippers for the fast path. They only see text without a NOT_PLAIN character (so a
// string is `"` … next `"`); they return the position after the value, or -1 to give up (bad or
// unusual input: the record then takes the slow path).

/** What the fast path cannot take as is: escapes, control characters (incl. \t\n\r), surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const NOT_PLAIN = /[\x00-\x1f\\\ud800-\udfff]/;
const MAX_DEPTH = 64;

function skipNumber(s: string, p: number): number {
  let i = p;
  let c = s.charCodeAt(i);
  if (c === 45) c = s.charCodeAt(++i);
  if (c === 48) c = s.charCodeAt(++i);
  else if (c >= 49 && c <= 57) {
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  } else return -1;
  if (c === 46) {
    c = s.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  if (c === 101 || c === 69) {
    c = s.charCodeAt(++i);
    if (c === 43 || c === 45) c = s.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  return i;
}

/** Skips one JSON value at `p`, checking only that it is well formed. */
function skipValue(s: string, p: number, depth: number): number {
  switch (s.charCodeAt(p)) {
    case 34: {
      const e = s.indexOf('"', p + 1);
      return e < 0 ? -1 : e + 1;
    }
    case 123:
      return skipObject(s, p, depth);
    case 91:
      return skipArray(s, p, depth);
    case 116:
      return s.startsWith('true', p) ? p + 4 : -1;
    case 102:
      return s.startsWith('false', p) ? p + 5 : -1;
    case 110:
      return s.startsWith('null', p) ? p + 4 : -1;
    default:
      return skipNumber(s, p);
  }
}

function skipObject(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  let c = s.charCodeAt(++p);
  if (c === 125) return p + 1;
  for (;;) {
    if (c !== 34) return -1;
    const e = s.indexOf('"', p + 1);
    if (e < 0 || s.charCodeAt(e + 1) !== 58) return -1;
    p = skipValue(s, e + 2, depth + 1);
    if (p < 0) return -1;
    c = s.charCodeAt(p);
    if (c === 44) {
      c = s.charCodeAt(++p);
      continue;
    }
    return c === 125 ? p + 1 : -1;
  }
}

function skipArray(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  if (s.charCodeAt(++p) === 93) return p + 1;
  for (;;) {
    p = skipValue(s, p, depth + 1);
    if (p < 0) return -1;
    const c = s.charCodeAt(p);
    if (c === 44) {
      p++;
      continue;
    }
    return c === 93 ? p + 1 : -1;
  }
}

// Where the keys of the canonical objects being scanned start (just past the quote) and how long
// they are: a stack, each object checking its own keys for a repeat.
const keyStart: number[] = [];
const keyLength: number[] = [];

function sameText(s: string, a: number, b: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (s.charCodeAt(a + i) !== s.charCodeAt(b + i)) return false;
  return true;
}

/**
 * As skipValue, and gives up unless the value's text is exactly JSON.stringify(JSON.parse(text)):
 * numbers in shortest form, no integer-like key (JSON.parse would move it first), no repeated key
 * (the last would win, in the first one's place). Text that passed NOT_PLAIN has no other way to
 * differ: no whitespace (skipping gives up on it) and no escapes.
 */
function canonValue(s: string, p: number, depth: number): number {
  const c = s.charCodeAt(p);
  if (c === 123) return canonObject(s, p, depth);
  if (c === 91) return canonArray(s, p, depth);
  const e = skipValue(s, p, depth);
  if (e < 0 || c === 34 || c === 116 || c === 102 || c === 110) return e;
  const text = s.slice(p, e);
  return String(Number(text)) === text ? e : -1;
}

function canonObject(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  let c = s.charCodeAt(++p);
  if (c === 125) return p + 1;
  const base = keyStart.length;
  for (;;) {
    if (c !== 34) return -1;
    const a = p + 1;
    const e = s.indexOf('"', a);
    if (e < 0 || s.charCodeAt(e + 1) !== 58) return -1;
    const first = s.charCodeAt(a);
    if (first >= 48 && first <= 57) return -1;
    const n = e - a;
    for (let j = base; j < keyStart.length; j++) {
      if (keyLength[j] === n && sameText(s, keyStart[j], a, n)) return -1;
    }
    keyStart.push(a);
    keyLength.push(n);
    p = canonValue(s, e + 2, depth + 1);
    if (p < 0) return -1;
    c = s.charCodeAt(p);
    if (c === 44) {
      c = s.charCodeAt(++p);
      continue;
    }
    keyStart.length = base;
    keyLength.length = base;
    return c === 125 ? p + 1 : -1;
  }
}

function canonArray(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  if (s.charCodeAt(++p) === 93) return p + 1;
  for (;;) {
    p = canonValue(s, p, depth + 1);
    if (p < 0) return -1;
    const c = s.charCodeAt(p);
    if (c === 44) {
      p++;
      continue;
    }
    return c === 93 ? p + 1 : -1;
  }
}

/** Skips a column's value: a container is written out whole, so its text must be canonical. */
function skipLeaf(s: string, p: number): number {
  const c = s.charCodeAt(p);
  if (c === 123 || c === 91) {
    keyStart.length = 0;
    keyLength.length = 0;
    return canonValue(s, p, 1);
  }
  return skipValue(s, p, 1);
}

function finite(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

// ---------------------------------------------------------------------------------------------
// Code generation.

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

// The statements that add column i's value to the row: `put(expr)` adds it (as text or as a
// property). Locals: a (start), b (end), c (first char code), x (scratch). Common value types
// are converted inline; any other goes to the generic mapping of the parsed value (g).
function columnCode(column: ColumnSpec, i: number, modern: boolean, text: boolean): string {
  const put = (expr: string) =>
    text
      ? `t += (f ? '"${column.name}":' : ',"${column.name}":') + (${expr}); f = false;`
      : `r.${column.name} = ${expr};`;
  const raw = 's.slice(a, b)';
  const content = 's.slice(a + 1, b - 1)';
  const generic = `x = g(${i}, ${raw}); if (x !== undefined) { ${put('x')} }`;
  const isNumber = '(c === 45 || (c >= 48 && c <= 57))';
  let fast: string;
  switch (column.kind) {
    case 'string':
      fast = `if (c === 34) { ${put(text ? raw : content)} }`;
      break;
    case 'int64':
      fast = text
        ? `if (${isNumber}) { x = int64Number(${raw}); ${put(`typeof x === 'number' ? finite(x) : '"' + x + '"'`)} } else if (c === 34) { x = int64(${content}); if (x !== undefined) { ${put(`typeof x === 'number' ? finite(x) : '"' + x + '"'`)} } }`
        : `if (${isNumber}) { ${put(`int64Number(${raw})`)} } else if (c === 34) { x = int64(${content}); if (x !== undefined) { ${put('x')} } }`;
      break;
    case 'int32':
      fast = `if (${isNumber}) { ${put(text ? `finite(Number(${raw}))` : `Number(${raw})`)} }`;
      break;
    case 'bool':
      fast = `if (c === 116) { ${put(text ? "'1'" : '1')} } else if (c === 102) { ${put(text ? "'0'" : '0')} }`;
      break;
    case 'timestamp':
      fast = `if (c === 34) { x = ts(${content}); if (x !== undefined) { ${put(text ? `'"' + x + '"'` : 'x')} } }`;
      break;
    case 'string_list_map':
      fast = `if (c === 123) { ${put(modern ? (text ? raw : `parseExact(${raw})`) : text ? `JSON.stringify(${raw})` : raw)} }`;
      break;
    case 'json':
      fast = `if (c === 123 || c === 91) { ${put(text ? `JSON.stringify(${raw})` : raw)} }`;
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
  finite: typeof finite;
  int64: typeof int64;
  int64Number: typeof int64Number;
  parseExact: typeof parseExact;
  ts: (v: string) => string | undefined;
  g: (i: number, raw: string) => unknown;
  gt: (i: number, raw: string) => string | undefined;
};

type Scanner = {
  /** Where column i's value lies in the last envelope scanned: at[2i] to at[2i+1], or -1. */
  at: Int32Array;
  /** Scans an envelope from the top (o0); false to give up. */
  scan(s: string): boolean;
  object(s: string): Record<string, unknown>;
  text(s: string): string;
};

function compileScanner(
  columns: readonly ColumnSpec[],
  profile: ServerProfile,
): Scanner | undefined {
  const nodes = pathTrie(columns);
  if (nodes === undefined) return undefined;
  const objects = nodes.filter((n) => n.children.size > 0).map(objectScanner);
  const objectCode = columns.map((c, i) => columnCode(c, i, profile.modern, false));
  const textCode = columns.map((c, i) => columnCode(c, i, profile.modern, true));
  const source = `
  const { skipValue, skipLeaf, finite, int64, int64Number, parseExact, ts } = h;
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
  function text(s) {
    const g = h.gt;
    let t = '', f = true, a, b, c, x;
${textCode.join('\n')}
    return '{' + t + '}\\n';
  }
  return { at, scan, object, text };`;
  const helpers: Helpers = {
    skipValue,
    skipLeaf,
    finite,
    int64,
    int64Number,
    parseExact,
    ts: (v) => timestamp(v, profile),
    g: (i, raw) => columnValue(columns[i], parseExact(raw), profile),
    gt: (i, raw) => {
      const value = columnValue(columns[i], parseExact(raw), profile);
      return value === undefined ? undefined : JSON.stringify(value);
    },
  };
  return new Function('h', source)(helpers) as Scanner;
}

// The text around the column values of one envelope layout (the same keys in the same order, the
// same text outside the columns' values): seps[k] comes before the k-th value in text order, which
// is column order[k]'s. An envelope that is exactly these separators around well-formed values
// has the same structure, so its values sit at the same paths: one startsWith per value instead
// of walking every key. Learnt from envelopes the scanner has read.
interface Layout {
  seps: string[];
  order: number[];
  tail: string;
}

// A few layouts per table: a full envelope and the projections of the subscriptions feeding it
// (most recently used first).
const MAX_LAYOUTS = 8;
const MISSES_BEFORE_PAUSE = 4 * MAX_LAYOUTS;
const PAUSE = 1024;

// A flat copy: startsWith measured ~10% slower per envelope against slices of a longer string, and
// a layout should not keep the envelope it was learnt from alive.
function flat(text: string): string {
  return text.split('').join('');
}

function layoutOf(s: string, at: Int32Array): Layout {
  const order: number[] = [];
  for (let i = 0; i < at.length; i += 2) if (at[i] >= 0) order.push(i >> 1);
  order.sort((x, y) => at[2 * x] - at[2 * y]);
  const seps: string[] = [];
  let p = 0;
  for (const i of order) {
    seps.push(flat(s.slice(p, at[2 * i])));
    p = at[2 * i + 1];
  }
  return { seps, order, tail: flat(s.slice(p)) };
}

function matchLayout(layout: Layout, s: string, at: Int32Array): boolean {
  const { seps, order } = layout;
  at.fill(-1);
  let p = 0;
  for (let k = 0; k < seps.length; k++) {
    const sep = seps[k];
    if (!s.startsWith(sep, p)) return false;
    p += sep.length;
    const i = 2 * order[k];
    at[i] = p;
    p = s.charCodeAt(p) === 34 ? s.indexOf('"', p + 1) + 1 || -1 : skipLeaf(s, p);
    if (p < 0) return false;
    at[i + 1] = p;
  }
  return s.length - p === layout.tail.length && s.startsWith(layout.tail, p);
}

function compileEncoder(columns: readonly ColumnSpec[], profile: ServerProfile): RowEncoder {
  const slowObject = (json: string) => rowOf(parseExact(json), columns, profile);
  const slowText = (json: string) => `${JSON.stringify(slowObject(json))}\n`;
  const scanner = compileScanner(columns, profile);
  if (scanner === undefined) return { object: slowObject, text: slowText };
  const { at } = scanner;
  const layouts: Layout[] = [];
  // More layouts in turn than the list holds would make every record pay for failed matches and
  // a new layout: after that many misses in a row, the next records are just scanned.
  let misses = 0;
  let pause = 0;
  // Finds the columns' values (fills `at`); false if the record must take the slow path.
  const locate = (s: string): boolean => {
    if (NOT_PLAIN.test(s)) return false;
    if (pause > 0) {
      pause--;
      return scanner.scan(s);
    }
    for (let k = 0; k < layouts.length; k++) {
      if (matchLayout(layouts[k], s, at)) {
        if (k > 0) layouts.unshift(...layouts.splice(k, 1));
        misses = 0;
        return true;
      }
    }
    if (!scanner.scan(s)) return false;
    if (++misses > MISSES_BEFORE_PAUSE) {
      misses = 0;
      pause = PAUSE;
      layouts.length = 0;
    } else if (layouts.unshift(layoutOf(s, at)) > MAX_LAYOUTS) {
      layouts.pop();
    }
    return true;
  };
  return {
    object: (json) => (locate(json) ? scanner.object(json) : slowObject(json)),
    text: (json) => (locate(json) ? scanner.text(json) : slowText(json)),
  };
}

type Compiled = { modern?: RowEncoder; legacy?: RowEncoder };

// By column array (the catalogue's are made once), then by content: a caller that builds an equal
// array per call still gets the encoder compiled before, not a new one per record.
const byArray = new WeakMap<readonly ColumnSpec[], Compiled>();
const bySpec = new Map<string, Compiled>();

/** The row encoder of a column set on a server profile, compiled on first use. */
export function rowEncoder(columns: readonly ColumnSpec[], profile: ServerProfile): RowEncoder {
  let entry = byArray.get(columns);
  if (entry === undefined) {
    const spec = JSON.stringify(columns.map((c) => [c.name, c.path, c.kind]));
    entry = bySpec.get(spec);
    if (entry === undefined) {
      entry = {};
      bySpec.set(spec, entry);
    }
    byArray.set(columns, entry);
  }
  const key = profile.modern ? 'modern' : 'legacy';
  let encoder = entry[key];
  if (encoder === undefined) {
    encoder = compileEncoder(columns, profile);
    entry[key] = encoder;
  }
  return encoder;
}
