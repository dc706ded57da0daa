import { join } from 'node:path';
import { Piscina } from 'piscina';
import { SinkError } from '../types.ts';
import type { TableChunk } from './encode.ts';

// RowBinary encoding runs in a worker thread, not on the ingest thread (the hot path's rule:
// what can run in a worker does not run on the main thread). One small pool for every ClickHouse
// destination of the process, started with the first and left to end when idle. The batch goes
// as the records' JSON text, the rows come back as transferred buffers (no copy).

const WORKER_FILE = join(import.meta.dirname, '..', '..', 'workers', 'clickhouse-encode.ts');

/** One batch for the worker: its tables' envelopes and the server they are written for. */
export interface EncodeTask {
  modern: boolean;
  tables: TableChunk[];
}

/** Each table's rows, in task order; or why the batch cannot be encoded (bad JSON, say). */
export type EncodeResult = { buffers: Uint8Array[] } | { error: string };

let pool: Piscina<EncodeTask, EncodeResult> | undefined;

function encodePool(): Piscina<EncodeTask, EncodeResult> {
  if (pool === undefined) {
    pool = new Piscina<EncodeTask, EncodeResult>({
      filename: WORKER_FILE,
      minThreads: 0,
      // Destinations write one batch at a time each; one thread bounds the sink's share of the
      // CPU on a small machine.
      maxThreads: 1,
      idleTimeout: 30_000,
    });
    // A worker that fails between tasks is replaced by the pool; unheard, it would end the process.
    pool.on('error', () => {});
  }
  return pool;
}

/**
 * Each table's RowBinary rows. A batch that cannot be encoded fails for good (the same records
 * fail again); a worker that died fails for now.
 */
export async function encodeInWorker(task: EncodeTask): Promise<Uint8Array[]> {
  let result: EncodeResult;
  try {
    result = await encodePool().run(task);
  } catch (err) {
    throw new SinkError('clickhouse: the encoding worker failed; retry', true, { cause: err });
  }
  if ('error' in result) {
    throw new SinkError(`clickhouse: cannot encode batch: ${result.error}`, false);
  }
  return result.buffers;
}
