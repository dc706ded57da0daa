import { move, transferableSymbol, valueSymbol } from 'piscina';
import { encodeRowBinary } from '../sinks/clickhouse/encode.ts';
import type { EncodeResult, EncodeTask } from '../sinks/clickhouse/encode-pool.ts';

// Piscina worker entry point of the ClickHouse sink: a batch's envelopes to RowBinary rows. At
// the process's own CPU priority, unlike the route-events workers: an acknowledgement waits for
// this work, and a lower priority starved it on a busy machine (bench:clickhouse at load 15).

/** Encodes each table's envelopes; bad JSON is answered as an error, not thrown (see encode-pool). */
export default function encodeBatch(task: EncodeTask): EncodeResult | ReturnType<typeof move> {
  let buffers: Uint8Array[];
  try {
    const profile = { version: '', modern: task.modern };
    buffers = task.tables.map((chunk) => encodeRowBinary(chunk, profile));
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
  return move({
    get [transferableSymbol]() {
      return buffers.map((b) => b.buffer);
    },
    get [valueSymbol]() {
      return { buffers };
    },
  });
}
