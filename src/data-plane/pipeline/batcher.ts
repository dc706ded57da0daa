import { AppError } from '../../shared/errors.ts';
import { batchOf, type RecordBlock } from '../sinks/record-block.ts';
import type { Batch } from '../sinks/types.ts';

/** Size and timing limits of one destination's batches. */
export interface BatcherOptions {
  /** A batch is flushed as soon as it holds this many records. */
  maxEvents: number;
  /** A batch is flushed before a record would push it past this many bytes of NDJSON. */
  maxBytes: number;
  /**
   * With no flush in flight, a batch is flushed this long after its first record arrived, full
   * or not; records that arrive during a flush go as one batch as soon as it ends.
   */
  lingerMs: number;
  /**
   * Bound on bytes accepted but not yet flushed (open batch + queued + in flight); default
   * 8 × maxBytes. Only a single record larger than the bound may exceed it, taken alone.
   */
  maxPendingBytes?: number;
}

/** What createBatcher needs: the limits and the one call that makes a batch durable. */
export interface BatcherDeps<R> extends BatcherOptions {
  /** Makes a batch durable; what it resolves with is handed to the adds whose records it held. */
  flush: (batch: Batch) => Promise<R>;
}

/** Groups records into batches and flushes them one at a time, in arrival order. */
export interface Batcher<R> {
  /**
   * Resolves once every batch holding these records has flushed, with what each flush gave;
   * rejects with the flush error,
   * or with BatcherFullError (nothing taken) when they do not fit now. Records that could never
   * fit (more than maxPendingBytes) are taken in pieces as flushes free room.
   */
  add(records: RecordBlock): Promise<R[]>;
  /** Bytes accepted but not yet flushed: the batcher's share of the destination's memory. */
  readonly pendingBytes: number;
  /** Stops accepting records, flushes what is left and waits for every flush to settle. */
  close(): Promise<void>;
}

/** Thrown by add() when the pending bound would be exceeded: backpressure, nothing was accepted. */
export class BatcherFullError extends Error {
  constructor(pendingBytes: number, maxPendingBytes: number) {
    super(`batcher full: ${pendingBytes} of ${maxPendingBytes} pending bytes in use`);
    this.name = 'BatcherFullError';
  }
}

interface OpenBatch<R> {
  /** Slices of the blocks added (views, no copy): the flushed batch's blocks. */
  pieces: RecordBlock[];
  count: number;
  bytes: number;
  done: Promise<R>;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

function openBatch<R>(): OpenBatch<R> {
  let resolve!: (result: R) => void;
  let reject!: (err: unknown) => void;
  const done = new Promise<R>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { pieces: [], count: 0, bytes: 0, done, resolve, reject };
}

function recordBytes(block: RecordBlock, i: number): number {
  return block.ends[i] - block.start(i);
}

/** An add() larger than the whole bound, taken piece by piece. */
interface Feed<R> {
  block: RecordBlock;
  next: number;
  waits: Set<Promise<R>>;
  taken: () => void;
}

/** Builds a batcher: flush on max events, max bytes, or a linger timer started at the first record. */
export function createBatcher<R>(deps: BatcherDeps<R>): Batcher<R> {
  const { maxEvents, maxBytes, lingerMs, flush } = deps;
  if (!(maxEvents >= 1) || !(maxBytes >= 1) || !(lingerMs >= 0)) {
    throw new RangeError('batcher: maxEvents and maxBytes must be >= 1, lingerMs >= 0');
  }
  const maxPendingBytes = deps.maxPendingBytes ?? maxBytes * 8;
  const queue: OpenBatch<R>[] = [];
  let current: OpenBatch<R> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let pendingBytes = 0;
  let draining: Promise<void> | undefined;
  let feeding: Feed<R> | undefined;
  let closed = false;

  function seal(): void {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (!current || current.count === 0) return;
    queue.push(current);
    current = undefined;
    draining ??= drain();
  }

  // The linger only applies while no flush is in flight. During one, the open batch keeps
  // filling and goes as soon as the flush ends (group commit): sealed at each linger, several
  // small batches queued behind one slow write (an fsync) and each waited for its own.
  function lingered(): void {
    timer = undefined;
    if (draining === undefined) seal();
  }

  // One flush in flight at a time keeps the destination's order; the loop ends when the queue is
  // empty and no open batch waits for the flush to end.
  async function drain(): Promise<void> {
    for (let batch = queue.shift(); batch; batch = queue.shift()) {
      try {
        batch.resolve(await flush(batchOf(batch.pieces)));
      } catch (err) {
        batch.reject(err);
      } finally {
        pendingBytes -= batch.bytes;
        feed();
      }
      // What arrived during the flush goes now, as one batch (seal() finds `draining` set).
      if (queue.length === 0) seal();
    }
    draining = undefined;
  }

  // Adds records [from, to) of a block to the open batch, sealing it whenever it is full: each
  // batch takes a slice (a view, no copy) of as many records as fit, and at least one.
  function addRange(block: RecordBlock, from: number, to: number, waits: Set<Promise<R>>): void {
    while (from < to) {
      if (current && current.count > 0 && current.bytes + recordBytes(block, from) > maxBytes) {
        seal();
      }
      if (!current) {
        current = openBatch();
        timer = setTimeout(lingered, lingerMs);
      }
      const base = block.start(from);
      const room = maxBytes - current.bytes;
      const last = Math.min(to, from + maxEvents - current.count);
      let next = from + 1;
      while (next < last && block.ends[next] - base <= room) next++;
      const piece = block.slice(from, next);
      current.pieces.push(piece);
      current.count += piece.count;
      current.bytes += piece.bytes;
      waits.add(current.done);
      if (current.count >= maxEvents || current.bytes >= maxBytes) seal();
      from = next;
    }
  }

  // Takes what fits of the oversized add; when the rest must wait, seals the open batch so the
  // flush that frees room starts now instead of after the linger.
  function feed(): void {
    const f = feeding;
    if (f === undefined) return;
    const { block } = f;
    let end = f.next;
    let taking = 0;
    for (; end < block.count; end++) {
      const size = recordBytes(block, end);
      if (pendingBytes + taking > 0 && pendingBytes + taking + size > maxPendingBytes) break;
      taking += size;
    }
    if (end > f.next) {
      pendingBytes += taking;
      addRange(block, f.next, end, f.waits);
      f.next = end;
      // Awaited once every piece is taken; a batch that fails meanwhile must not go unhandled.
      for (const wait of f.waits) wait.catch(() => {});
    }
    if (f.next < block.count) {
      seal();
      return;
    }
    feeding = undefined;
    f.taken();
  }

  return {
    add(records) {
      if (closed) return Promise.reject(new AppError('ERR_UNAVAILABLE', 'batcher closed; retry'));
      if (records.count === 0) return Promise.resolve([]);
      const total = records.bytes;
      if (feeding !== undefined || (pendingBytes > 0 && pendingBytes + total > maxPendingBytes)) {
        return Promise.reject(new BatcherFullError(pendingBytes, maxPendingBytes));
      }
      const waits = new Set<Promise<R>>();
      if (total > maxPendingBytes) {
        const taken = new Promise<void>((resolve) => {
          feeding = { block: records, next: 0, waits, taken: resolve };
        });
        feed();
        return taken.then(() => Promise.all(waits));
      }
      pendingBytes += total;
      addRange(records, 0, records.count, waits);
      return Promise.all(waits);
    },
    get pendingBytes() {
      return pendingBytes;
    },
    async close() {
      closed = true;
      do {
        seal();
        if (draining) await draining;
      } while (feeding !== undefined || draining !== undefined || current !== undefined);
    },
  };
}
