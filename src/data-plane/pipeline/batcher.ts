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
   * or not, when the last flush ended less than this long before; a destination idle for longer
   * flushes at the end of the event loop's turn (0: always). Records that arrive during a flush
   * go as one batch as soon as it ends.
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

/**
 * Every flush's result once all have settled, or the first failure: an add's records may be in
 * several batches, and the caller may reuse their bytes only when no batch holds them any more.
 */
async function allSettled<R>(waits: Set<Promise<R>>): Promise<R[]> {
  const results = await Promise.allSettled(waits);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure !== undefined) throw failure.reason;
  return results.map((result) => (result as PromiseFulfilledResult<R>).value);
}

/** Builds a batcher: flush on max events, max bytes, or the linger started at the first record. */
export function createBatcher<R>(deps: BatcherDeps<R>): Batcher<R> {
  const { maxEvents, maxBytes, lingerMs } = deps;
  if (!(maxEvents >= 1) || !(maxBytes >= 1) || !(lingerMs >= 0)) {
    throw new RangeError('batcher: maxEvents and maxBytes must be >= 1, lingerMs >= 0');
  }
  return new GroupCommitBatcher(deps, deps.maxPendingBytes ?? maxBytes * 8);
}

/**
 * The batcher's state and its steps: records go into the open batch (addRange), a full or
 * lingered batch is sealed onto the queue (seal), and one drain loop flushes the queue in order
 * (drain), feeding an oversized add as room frees up (feed).
 */
class GroupCommitBatcher<R> implements Batcher<R> {
  private readonly queue: OpenBatch<R>[] = [];
  private current: OpenBatch<R> | undefined;
  /** Cancels the open batch's linger (a timer, or the end of the loop's turn). */
  private cancelLinger: (() => void) | undefined;
  /** When the last flush ended (performance.now()). */
  private lastFlushEnd = Number.NEGATIVE_INFINITY;
  private draining: Promise<void> | undefined;
  private feeding: Feed<R> | undefined;
  private closed = false;
  private readonly deps: BatcherDeps<R>;
  private readonly maxPendingBytes: number;
  /** Bytes accepted but not yet flushed (read as pendingBytes). */
  private pending = 0;

  constructor(deps: BatcherDeps<R>, maxPendingBytes: number) {
    this.deps = deps;
    this.maxPendingBytes = maxPendingBytes;
  }

  add(records: RecordBlock): Promise<R[]> {
    if (this.closed) {
      return Promise.reject(new AppError('ERR_UNAVAILABLE', 'batcher closed; retry'));
    }
    if (records.count === 0) return Promise.resolve([]);
    const total = records.bytes;
    const { pending, maxPendingBytes } = this;
    if (this.feeding !== undefined || (pending > 0 && pending + total > maxPendingBytes)) {
      return Promise.reject(new BatcherFullError(pending, maxPendingBytes));
    }
    const waits = new Set<Promise<R>>();
    if (total > maxPendingBytes) {
      const taken = new Promise<void>((resolve) => {
        this.feeding = { block: records, next: 0, waits, taken: resolve };
      });
      this.feed();
      return taken.then(() => allSettled(waits));
    }
    this.pending += total;
    this.addRange(records, 0, records.count, waits);
    return allSettled(waits);
  }

  get pendingBytes(): number {
    return this.pending;
  }

  async close(): Promise<void> {
    this.closed = true;
    do {
      this.seal();
      if (this.draining) await this.draining;
    } while (
      this.feeding !== undefined ||
      this.draining !== undefined ||
      this.current !== undefined
    );
  }

  private seal(): void {
    this.cancelLinger?.();
    this.cancelLinger = undefined;
    const current = this.current;
    if (!current || current.count === 0) return;
    this.queue.push(current);
    this.current = undefined;
    this.draining ??= this.drain();
  }

  // The linger only applies while no flush is in flight. During one, the open batch keeps
  // filling and goes as soon as the flush ends (group commit): sealed at each linger, several
  // small batches queued behind one slow write (an fsync) and each waited for its own.
  private readonly lingered = (): void => {
    this.cancelLinger = undefined;
    if (this.draining === undefined) this.seal();
  };

  // Records keep coming while flushes end within a linger of each other (the edge's events, one
  // at a time): waiting gathers them. A destination idle for longer has nothing coming to wait
  // for: its batch goes at the end of this turn of the loop, with whatever arrived in it.
  private startLinger(): void {
    const { lingerMs } = this.deps;
    if (performance.now() - this.lastFlushEnd >= lingerMs) {
      const immediate = setImmediate(this.lingered);
      this.cancelLinger = () => clearImmediate(immediate);
    } else {
      const timer = setTimeout(this.lingered, lingerMs);
      this.cancelLinger = () => clearTimeout(timer);
    }
  }

  // One flush in flight at a time keeps the destination's order; the loop ends when the queue is
  // empty and no open batch waits for the flush to end.
  private async drain(): Promise<void> {
    const { queue } = this;
    for (let batch = queue.shift(); batch; batch = queue.shift()) {
      try {
        batch.resolve(await this.deps.flush(batchOf(batch.pieces)));
      } catch (err) {
        batch.reject(err);
      } finally {
        this.lastFlushEnd = performance.now();
        this.pending -= batch.bytes;
        this.feed();
      }
      // What arrived during the flush goes now, as one batch (seal() finds `draining` set).
      if (queue.length === 0) this.seal();
    }
    this.draining = undefined;
  }

  // Adds records [from, to) of a block to the open batch, sealing it whenever it is full: each
  // batch takes a slice (a view, no copy) of as many records as fit, and at least one.
  private addRange(block: RecordBlock, from: number, to: number, waits: Set<Promise<R>>): void {
    const { maxEvents, maxBytes } = this.deps;
    while (from < to) {
      let current = this.current;
      if (current && current.count > 0 && current.bytes + recordBytes(block, from) > maxBytes) {
        this.seal();
        current = undefined;
      }
      if (!current) {
        current = this.current = openBatch();
        this.startLinger();
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
      if (current.count >= maxEvents || current.bytes >= maxBytes) this.seal();
      from = next;
    }
  }

  // Takes what fits of the oversized add; when the rest must wait, seals the open batch so the
  // flush that frees room starts now instead of after the linger.
  private feed(): void {
    const f = this.feeding;
    if (f === undefined) return;
    const end = this.fitting(f.block, f.next);
    if (end > f.next) {
      this.addRange(f.block, f.next, end, f.waits);
      f.next = end;
      // Awaited once every piece is taken; a batch that fails meanwhile must not go unhandled.
      for (const wait of f.waits) wait.catch(() => {});
    }
    if (f.next < f.block.count) {
      this.seal();
      return;
    }
    this.feeding = undefined;
    f.taken();
  }

  /** Counts as pending the records of `block` from `from` on that fit under the bound now; returns where they end. */
  private fitting(block: RecordBlock, from: number): number {
    let end = from;
    let taking = 0;
    for (; end < block.count; end++) {
      const size = recordBytes(block, end);
      if (this.pending + taking > 0 && this.pending + taking + size > this.maxPendingBytes) {
        break;
      }
      taking += size;
    }
    this.pending += taking;
    return end;
  }
}
