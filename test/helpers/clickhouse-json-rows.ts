import {
  byTable,
  type TableFor,
  type TableTarget,
} from '../../src/data-plane/sinks/clickhouse/encode.ts';
import { rowOf } from '../../src/data-plane/sinks/clickhouse/row-values.ts';
import type { ServerProfile } from '../../src/data-plane/sinks/clickhouse/schema.ts';
import type { Batch } from '../../src/data-plane/sinks/types.ts';
import { parseExact } from '../../src/data-plane/wire-json/int64-json.ts';

/**
 * The JSONEachRow rows the ClickHouse sink inserted before RowBinary, per table: each envelope
 * parsed and mapped by the reference mapping (a column whose value is absent is left out, so the
 * server stores its type's default). What the RowBinary path is compared with.
 */
export function jsonEachRowRows(
  batch: Batch,
  tableFor: TableFor,
  profile: ServerProfile,
): Map<string, { target: TableTarget; rows: Record<string, unknown>[] }> {
  const out = new Map<string, { target: TableTarget; rows: Record<string, unknown>[] }>();
  for (const [table, { target, jsons }] of byTable(batch, tableFor)) {
    out.set(table, {
      target,
      rows: jsons.map((json) => rowOf(parseExact(json), target.columns, profile)),
    });
  }
  return out;
}
