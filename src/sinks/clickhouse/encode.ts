import type { ColumnSpec } from '../../catalogue/types.ts';
import type { Batch } from '../types.ts';
import { SinkError } from '../types.ts';
import { type RowEncoder, rowEncoder } from './row-encoder.ts';
import type { ServerProfile } from './schema.ts';

export { columnValue } from './row-values.ts';

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

// Splits a batch by table in record order, handing each record to its table's compiled encoder.
function byTable<G>(
  batch: Batch,
  tableFor: TableFor,
  profile: ServerProfile,
  open: (target: TableTarget) => G,
  add: (group: G, encoder: RowEncoder, json: string) => void,
): Map<string, G> {
  const out = new Map<string, G>();
  let last: TableTarget | undefined;
  let encoder: RowEncoder | undefined;
  for (const record of batch.records) {
    const target = tableFor(record.eventType);
    if (!target) {
      throw new SinkError(`clickhouse: no table for event type ${record.eventType}`, false);
    }
    let group = out.get(target.table);
    if (group === undefined) {
      group = open(target);
      out.set(target.table, group);
    }
    if (target !== last || encoder === undefined) {
      encoder = rowEncoder(target.columns, profile);
      last = target;
    }
    add(group, encoder, record.json);
  }
  return out;
}

/**
 * Splits a batch into rows per table. A column whose value is absent is left out of the row, so
 * ClickHouse stores the type's default. An event type with no table is a catalogue/configuration
 * error: permanent, so the destination parks and says so. Bad JSON throws JSON.parse's error.
 */
export function encodeRows(
  batch: Batch,
  tableFor: TableFor,
  profile: ServerProfile,
): Map<string, TableRows> {
  return byTable<TableRows>(
    batch,
    tableFor,
    profile,
    (target) => ({ target, rows: [] }),
    (group, encoder, json) => {
      group.rows.push(encoder.object(json));
    },
  );
}
