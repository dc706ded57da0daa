import type { ColumnSpec } from '../../../catalogue/types.ts';
import type { Batch } from '../types.ts';
import { SinkError } from '../types.ts';
import { ByteWriter } from './row-binary.ts';
import { rowEncoder } from './row-encoder.ts';
import type { ServerProfile } from './schema.ts';

/** The table an event type lands in and its columns; undefined for a type with no table. */
export interface TableTarget {
  table: string;
  columns: ColumnSpec[];
}

/** Looks up an event type's table: given to the sink by the catalogue. */
export type TableFor = (eventType: string) => TableTarget | undefined;

/** The envelopes of a batch that go to one table, in record order. */
export interface TableRecords {
  target: TableTarget;
  jsons: string[];
}

/**
 * Splits a batch by table. An event type with no table is a catalogue/configuration error:
 * permanent, so the destination parks and says so.
 */
export function byTable(batch: Batch, tableFor: TableFor): Map<string, TableRecords> {
  const out = new Map<string, TableRecords>();
  let last: TableTarget | undefined;
  let group: TableRecords | undefined;
  for (const block of batch.blocks) {
    for (let i = 0; i < block.count; i++) {
      const eventType = block.eventType(i);
      const target = tableFor(eventType);
      if (!target) {
        throw new SinkError(`clickhouse: no table for event type ${eventType}`, false);
      }
      if (target !== last || group === undefined) {
        group = out.get(target.table);
        if (group === undefined) {
          group = { target, jsons: [] };
          out.set(target.table, group);
        }
        last = target;
      }
      group.jsons.push(block.json(i));
    }
  }
  return out;
}

/** One table's part of an encode task: its columns, their types in the table, the envelopes. */
export interface TableChunk {
  columns: readonly ColumnSpec[];
  /** Each column's type as the table has it (`system.columns`), in `columns` order. */
  types: readonly string[];
  jsons: readonly string[];
}

/**
 * The RowBinary rows of the envelopes, one per envelope, the columns in order. Throws
 * JSON.parse's error on bad JSON, and for a column type it cannot write.
 */
export function encodeRowBinary(chunk: TableChunk, profile: ServerProfile): Buffer {
  const encoder = rowEncoder(chunk.columns, chunk.types, profile);
  let chars = 0;
  for (const json of chunk.jsons) chars += json.length;
  // RowBinary leaves out the keys and most punctuation: rarely more than the envelopes' text.
  const w = new ByteWriter(chars + 1024);
  for (const json of chunk.jsons) encoder.write(json, w);
  return w.result();
}
