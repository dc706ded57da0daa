import type { ColumnSpec } from '../../../catalogue/types.ts';
import { parseExact } from '../../wire-json/int64-json.ts';
import { NOT_PLAIN, skipLeaf } from './json-scan.ts';
import { type ByteWriter, clampDateTime, valueWriter } from './row-binary.ts';
import { compileScanner, type Scanner } from './row-scanner.ts';
import { columnValue, rowOf } from './row-values.ts';
import type { ServerProfile } from './schema.ts';
import { mapOfLists, rfc3339Millis, smallInteger } from './text-values.ts';

// One table's row encoder, compiled once per (columns, table column types, server profile). It
// writes a record's envelope JSON as one RowBinary row of the table (row-binary.ts).
//
// Fast path: no JSON.parse. A generated scanner walks the envelope text, descending only into the
// objects on the columns' paths (constant keys per level) and noting where each column's value
// starts and ends; everything else is checked to be well formed and skipped. Once an envelope has
// been read, its layout (the text between the column values) is remembered: the next envelopes of
// that layout are read with one startsWith per value. Strings are copied as raw bytes, which is
// exact because the fast path only takes text whose strings need no unescaping (no backslash, no
// control character, no surrogate: one native regex test per record); an all-ASCII envelope is
// encoded to UTF-8 once and its values copied from there. A container value written out whole (a
// header map, a JSON column) is copied as text too, so it must be exactly what
// JSON.stringify(JSON.parse(slice)) would give: no whitespace, numbers in their shortest form, no
// integer-like key (JSON.parse moves those first), no repeated key. Integers, booleans and
// RFC 3339 timestamps are read from the text (text-values.ts).
//
// Anything else (escapes, whitespace, a repeated key on a column's path, malformed JSON) makes the
// scanner give up, and the record takes the slow path: JSON.parse (parseExact: integers beyond
// 2^53 keep their digits), the reference mapping of row-values.ts (what the JSONEachRow insert
// sent) and the type's writer. The fast path reproduces it byte for byte; a value of a type it
// does not expect for its column is parsed alone and given to the same mapping. Column sets the
// scanner cannot serve (a column whose path is a prefix of another's, such as the audit table's
// whole `object` next to `object.id`; a name that is not a plain identifier) always take the slow
// path.

/** Writes envelopes (a record's `json`) as one table's rows; throws JSON.parse's error on bad JSON. */
export interface RowEncoder {
  write(json: string, w: ByteWriter): void;
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

// How the fast path writes each column, chosen from its kind and the table's actual type; any
// other pair (a table made for another server version, say) is written by the reference mapping.
const GENERIC = 0;
const STRING = 1; // a JSON string's content as String
const TEXT = 2; // a container's canonical text as String (json; a header map on legacy servers)
const INT64 = 3;
const INT32 = 4;
const BOOL = 5;
const DATETIME = 6;
const DATETIME64_3 = 7;
const MAP = 8; // an object of string lists as Map(String, Array(String))

function fastOp(column: ColumnSpec, type: string): number {
  switch (column.kind) {
    case 'string':
      return type === 'String' || type === 'LowCardinality(String)' ? STRING : GENERIC;
    case 'json':
      return type === 'String' ? TEXT : GENERIC;
    case 'string_list_map':
      if (type === 'String') return TEXT;
      return type === 'Map(String, Array(String))' ? MAP : GENERIC;
    case 'int64':
      return type === 'Int64' ? INT64 : GENERIC;
    case 'int32':
      return type === 'Int32' ? INT32 : GENERIC;
    case 'bool':
      return type === 'UInt8' ? BOOL : GENERIC;
    case 'timestamp':
      if (type === "DateTime('UTC')") return DATETIME;
      return type === "DateTime64(3, 'UTC')" ? DATETIME64_3 : GENERIC;
    case 'string_list':
      return GENERIC;
  }
}

function compileEncoder(
  columns: readonly ColumnSpec[],
  types: readonly string[],
  profile: ServerProfile,
): RowEncoder {
  const writers = types.map(valueWriter);
  const ops = columns.map((c, i) => fastOp(c, types[i]));
  const slow = (json: string, w: ByteWriter) => {
    const row = rowOf(parseExact(json), columns, profile);
    for (let i = 0; i < columns.length; i++) writers[i](w, row[columns[i].name]);
  };
  const scanner = compileScanner(columns);
  if (scanner === undefined) return { write: slow };
  const { at } = scanner;
  const locator = new Locator(scanner);
  const text = new AsciiText();
  return {
    write(s, w) {
      if (!locator.locate(s)) return slow(s, w);
      const bytes = text.bytesOf(s);
      for (let i = 0; i < columns.length; i++) {
        const a = at[2 * i];
        // Absent, or null: the type's default, as for a field left out of a JSONEachRow row.
        if (a < 0 || s.charCodeAt(a) === 110) writers[i](w, undefined);
        else if (!writeFast(w, ops[i], s, bytes, a, at[2 * i + 1])) {
          writers[i](w, columnValue(columns[i], parseExact(s.slice(a, at[2 * i + 1])), profile));
        }
      }
    },
  };
}

/**
 * Finds the columns' values in an envelope (fills the scanner's `at`): by a remembered layout
 * when one matches, by the scanner otherwise, learning the layout of what it scanned.
 */
class Locator {
  private readonly scanner: Scanner;
  private readonly at: Int32Array;
  private readonly layouts: Layout[] = [];
  // More layouts in turn than the list holds would make every record pay for failed matches and
  // a new layout: after that many misses in a row, the next records are just scanned.
  private misses = 0;
  private pause = 0;

  constructor(scanner: Scanner) {
    this.scanner = scanner;
    this.at = scanner.at;
  }

  /** False if the record must take the slow path. */
  locate(s: string): boolean {
    if (NOT_PLAIN.test(s)) return false;
    if (this.pause > 0) {
      this.pause--;
      return this.scanner.scan(s);
    }
    const { layouts, at } = this;
    for (let k = 0; k < layouts.length; k++) {
      if (matchLayout(layouts[k], s, at)) {
        if (k > 0) layouts.unshift(...layouts.splice(k, 1));
        this.misses = 0;
        return true;
      }
    }
    if (!this.scanner.scan(s)) return false;
    if (++this.misses > MISSES_BEFORE_PAUSE) {
      this.misses = 0;
      this.pause = PAUSE;
      layouts.length = 0;
    } else if (layouts.unshift(layoutOf(s, at)) > MAX_LAYOUTS) {
      layouts.pop();
    }
    return true;
  }
}

const utf8 = new TextEncoder();

/**
 * The envelope's UTF-8 when it is all ASCII: text positions are then byte positions, and a
 * string value is copied from here without a call per value.
 */
class AsciiText {
  private bytes = new Uint8Array(4096);

  /** The text's bytes (valid up to its length), or undefined when it is not all ASCII. */
  bytesOf(s: string): Uint8Array | undefined {
    if (this.bytes.length < 3 * s.length) this.bytes = new Uint8Array(3 * s.length);
    return utf8.encodeInto(s, this.bytes).written === s.length ? this.bytes : undefined;
  }
}

// Writes a column's value found at s[a, b) the fast way `op` says, copying from `bytes` when the
// text is all ASCII; false to take the reference mapping instead.
function writeFast(
  w: ByteWriter,
  op: number,
  s: string,
  bytes: Uint8Array | undefined,
  a: number,
  b: number,
): boolean {
  const c = s.charCodeAt(a);
  switch (op) {
    case STRING:
      if (c !== 34) return false;
      if (bytes !== undefined) w.bytes(bytes, a + 1, b - 1);
      else w.string(s.slice(a + 1, b - 1));
      return true;
    case TEXT:
      if (c !== 123 && c !== 91) return false;
      if (bytes !== undefined) w.bytes(bytes, a, b);
      else w.string(s.slice(a, b));
      return true;
    case INT64: {
      const n = smallInteger(s, a, b);
      if (Number.isNaN(n)) return false;
      w.i64(n);
      return true;
    }
    case INT32: {
      const n = smallInteger(s, a, b);
      if (Number.isNaN(n)) return false;
      w.u32(n >>> 0);
      return true;
    }
    case BOOL:
      if (c !== 116 && c !== 102) return false;
      w.u8(c === 116 ? 1 : 0);
      return true;
    case DATETIME:
    case DATETIME64_3: {
      const ms = c === 34 ? rfc3339Millis(s, a + 1, b - 1) : Number.NaN;
      if (Number.isNaN(ms)) return false;
      if (op === DATETIME) w.u32(clampDateTime(Math.floor(ms / 1000)));
      else w.i64(ms);
      return true;
    }
    case MAP:
      return c === 123 && mapOfLists(w, s, a, b);
  }
  return false;
}

// By column set, table types and server profile: the worker gets its columns anew with each task.
const compiled = new Map<string, RowEncoder>();

/** The row encoder of a column set into a table of these column types, compiled on first use. */
export function rowEncoder(
  columns: readonly ColumnSpec[],
  types: readonly string[],
  profile: ServerProfile,
): RowEncoder {
  const key = JSON.stringify([profile.modern, columns.map((c) => [c.name, c.path, c.kind]), types]);
  let encoder = compiled.get(key);
  if (encoder === undefined) {
    // Tables are few; a bound all the same, should column sets keep changing.
    if (compiled.size >= 256) compiled.clear();
    encoder = compileEncoder(columns, types, profile);
    compiled.set(key, encoder);
  }
  return encoder;
}
