import { parseExact } from '../../catalogue/int64-json.ts';
import type { ColumnSpec } from '../../catalogue/types.ts';
import { NOT_PLAIN, skipLeaf } from './json-scan.ts';
import { compileScanner } from './row-scanner.ts';
import { rowOf } from './row-values.ts';
import type { ServerProfile } from './schema.ts';

// One table's row encoder, generated once per (columns, server profile). It turns a record's
// envelope JSON into the table's JSONEachRow row, as the object @clickhouse/client stringifies.
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

/** Encodes envelopes (a record's `json`) into one table's rows; throws JSON.parse's error on bad JSON. */
export interface RowEncoder {
  /** The row as an object, for a JSONEachRow insert of values. */
  object(json: string): Record<string, unknown>;
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
  const scanner = compileScanner(columns, profile);
  if (scanner === undefined) return { object: slowObject };
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
