import type { ColumnSpec } from '../../catalogue/types.ts';
import type { Batch } from '../../pipeline/types.ts';
import { SinkError } from '../types.ts';
import type { ServerProfile } from './schema.ts';

/** The table an event type lands in and its columns; undefined for a type with no table. */
export interface TableTarget {
  table: string;
  columns: ColumnSpec[];
}

/** Looks up an event type's table: given to the sink by the catalogue. */
export type TableFor = (eventType: string) => TableTarget | undefined;

/** One JSONEachRow insert: the rows of a batch that belong to one table. */
export interface TableRows {
  target: TableTarget;
  rows: Record<string, unknown>[];
}

const RFC3339 = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z$/;

function two(n: number): string {
  return String(n).padStart(2, '0');
}

// Formats in UTC as the column expects: seconds on legacy DateTime, milliseconds on DateTime64(3).
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

// Proto JSON writes int64 as a string; a safe integer becomes a number, a larger one stays a
// string (ClickHouse parses quoted integers exactly, a JS number would lose digits).
function int64(value: unknown): number | string | undefined {
  if (typeof value === 'number') return Math.trunc(value);
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
      return Array.isArray(value) ? value.map(String) : undefined;
  }
}

function pick(doc: unknown, path: readonly string[]): unknown {
  let v = doc;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/**
 * Splits a batch into rows per table, parsing each record's JSON once. A column whose value is
 * absent is left out of the row, so ClickHouse stores the type's default. An event type with no
 * table is a catalogue/configuration error: permanent, so the destination parks and says so.
 */
export function encodeRows(
  batch: Batch,
  tableFor: TableFor,
  profile: ServerProfile,
): Map<string, TableRows> {
  const out = new Map<string, TableRows>();
  for (const record of batch.records) {
    const target = tableFor(record.eventType);
    if (!target) {
      throw new SinkError(`clickhouse: no table for event type ${record.eventType}`, false);
    }
    let group = out.get(target.table);
    if (!group) {
      group = { target, rows: [] };
      out.set(target.table, group);
    }
    const doc = JSON.parse(record.json);
    const row: Record<string, unknown> = {};
    for (const column of target.columns) {
      const value = columnValue(column, pick(doc, column.path), profile);
      if (value !== undefined) row[column.name] = value;
    }
    group.rows.push(row);
  }
  return out;
}
