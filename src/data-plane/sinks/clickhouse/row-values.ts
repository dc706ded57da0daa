import type { ColumnSpec } from '../../../catalogue/types.ts';
import { isRawJson } from '../../wire-json/int64-json.ts';
import type { ServerProfile } from './schema.ts';

// The reference semantics of a row: what the sink's JSONEachRow insert sent for each column's kind
// on a server profile, from a parsed envelope; row-binary.ts writes such a value as ClickHouse
// read it. The fast path (row-encoder.ts) reproduces it byte for byte and falls back on it for
// any value it does not expect.

const RFC3339 = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z$/;

function two(n: number): string {
  return String(n).padStart(2, '0');
}

/** Formats in UTC as the column expects: seconds on legacy DateTime, milliseconds on DateTime64(3). */
export function timestamp(value: unknown, profile: ServerProfile): string | undefined {
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
export function int64(value: unknown): number | string | undefined {
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
export function rowOf(
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
