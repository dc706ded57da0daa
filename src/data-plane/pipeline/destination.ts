import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { RecordBlock } from '../sinks/record-block.ts';
import { type Batch, type Sink, SinkError } from '../sinks/types.ts';
import { BatcherFullError, type BatcherOptions, createBatcher } from './batcher.ts';
import { type Spool, SpoolFullError } from './spool.ts';

/** ok: direct writes · retrying: sink failing or spool draining · parked: permanent error, slow retries. */
export type DestinationStatus = 'ok' | 'retrying' | 'parked';

/** What the health fields of an event destination show (snake_case: it is served as is). */
export interface DestinationHealth {
  status: DestinationStatus;
  last_error: string | null;
  last_error_at: string | null;
  last_success_at: string | null;
  /** What sits in the spool waiting for the sink. */
  backlog: { events: number; bytes: number };
}

/** Everything one destination needs: its sink, its spool and the delivery policy. */
export interface DestinationDeps {
  id: string;
  sink: Sink;
  spool: Spool;
  batcher: BatcherOptions;
  logger: Logger;
  /** Backoff for retriable errors: baseMs · 2^attempt, capped at maxMs, with jitter. */
  retry: { baseMs: number; maxMs: number };
  /** Delay between attempts while parked on a permanent error. */
  parkRetryMs: number;
  /** Source of jitter in [0, 1); Math.random unless given. */
  random?: () => number;
}

/**
 * What became of records a destination took: written by the sink, or spooled (`reason` says
 * why: the sink's error, or older events waiting in the spool). Either way they are durable.
 */
export interface Receipt {
  written: boolean;
  reason: string | null;
}

const WRITTEN: Receipt = { written: true, reason: null };
const QUEUED = 'queued behind events already waiting for this destination (its spool)';

/**
 * The per-destination delivery unit, and the one place sink results become acknowledgements:
 * a receipt when the records are durable, an AppError the client can act on when they are not.
 */
export interface Destination {
  /**
   * Resolves when every record is durable (written by the sink or appended to the spool);
   * rejects with ERR_BACKPRESSURE (spool or buffer full) or ERR_UNAVAILABLE (anything else).
   */
  deliver(records: RecordBlock): Promise<Receipt>;
  health(): DestinationHealth;
  /** Stops accepting, flushes the batcher (to sink or spool), stops replay, closes the sink. */
  close(): Promise<void>;
}

/** deliver() after close(): the service is shutting down; the caller retries elsewhere or later. */
export function destinationClosed(id: string): AppError {
  return new AppError('ERR_UNAVAILABLE', `destination ${id} is closed; retry`);
}

/** Records a destination could not make durable, as the error the client gets. */
export function notDurable(reason: unknown): AppError {
  if (reason instanceof AppError) return reason;
  if (reason instanceof SpoolFullError || reason instanceof BatcherFullError) {
    return new AppError(
      'ERR_BACKPRESSURE',
      'a destination cannot take more events now (spool or buffer full); retry later',
      {},
      { cause: reason },
    );
  }
  return new AppError(
    'ERR_UNAVAILABLE',
    'events could not be made durable; retry',
    {},
    {
      cause: reason,
    },
  );
}

function receiptOf(receipts: Receipt[]): Receipt {
  return receipts.find((receipt) => !receipt.written) ?? WRITTEN;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Builds a destination and, when its spool holds batches from before a restart, starts replaying them. */
export function createDestination(deps: DestinationDeps): Destination {
  const { id, sink, spool, retry, parkRetryMs } = deps;
  const random = deps.random ?? Math.random;
  const log = deps.logger.child({ destination: id });
  let status: DestinationStatus = 'ok';
  let lastError: string | null = null;
  let lastErrorAt: string | null = null;
  let lastSuccessAt: string | null = null;
  let attempt = 0;
  let closing = false;
  let stopping = false;
  let replayRunning = false;
  let replayDone: Promise<void> = Promise.resolve();
  let wake: (() => void) | undefined;
  let sleepTimer: NodeJS.Timeout | undefined;

  function setStatus(next: DestinationStatus): void {
    if (next === status) return;
    const from = status;
    status = next;
    if (next === 'ok') log.info({ from }, 'destination recovered');
    else if (next === 'parked') log.error({ from, err: lastError }, 'destination parked');
    else if (from === 'ok') log.warn({ err: lastError }, 'destination retrying');
  }

  function onSuccess(): void {
    lastSuccessAt = new Date().toISOString();
    attempt = 0;
  }

  function onFailure(err: unknown): void {
    lastError = describe(err);
    lastErrorAt = new Date().toISOString();
    // Anything but a permanent SinkError is retried on the fast schedule: a bug in a sink must not park.
    const permanent = err instanceof SinkError && !err.retriable;
    setStatus(permanent ? 'parked' : 'retrying');
  }

  function nextDelay(): number {
    if (status === 'parked') return parkRetryMs;
    const exp = Math.min(retry.maxMs, retry.baseMs * 2 ** attempt);
    attempt++;
    return exp / 2 + (exp / 2) * random();
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      wake = resolve;
      sleepTimer = setTimeout(resolve, ms);
    });
  }

  // Replays the spool head until the spool is empty. The emptiness check and the flag reset happen
  // in the same synchronous step, so an append that lands afterwards always starts a new loop.
  async function replayLoop(): Promise<void> {
    try {
      while (!stopping) {
        if (spool.count === 0) {
          setStatus('ok');
          return;
        }
        try {
          const head = await spool.peek();
          if (!head) continue;
          await sink.write(head.batch);
          await spool.remove(head.seq);
          onSuccess();
          if (status === 'parked') setStatus('retrying');
        } catch (err) {
          onFailure(err);
          if (!stopping) await sleep(nextDelay());
        }
      }
    } finally {
      replayRunning = false;
    }
  }

  function ensureReplay(): void {
    if (replayRunning || stopping) return;
    replayRunning = true;
    replayDone = replayLoop();
  }

  async function toSpool(batch: Batch, reason: string): Promise<Receipt> {
    await spool.append(batch);
    // The replay loop may have drained the spool while this append was in flight: not ok any more.
    if (status === 'ok') setStatus('retrying');
    ensureReplay();
    return { written: false, reason };
  }

  // Direct write only when nothing is spooled: a spooled batch is older and must reach the sink first.
  async function flush(batch: Batch): Promise<Receipt> {
    if (spool.count > 0) return toSpool(batch, lastError ?? QUEUED);
    try {
      await sink.write(batch);
      onSuccess();
      setStatus('ok');
      return WRITTEN;
    } catch (err) {
      onFailure(err);
      return toSpool(batch, describe(err));
    }
  }

  const batcher = createBatcher({ ...deps.batcher, flush });

  if (spool.count > 0) {
    log.info({ batches: spool.count, events: spool.events }, 'replaying spool from a previous run');
    status = 'retrying';
    ensureReplay();
  }

  return {
    deliver(records) {
      if (closing) return Promise.reject(destinationClosed(id));
      return batcher.add(records).then(receiptOf, (err: unknown) => {
        throw notDurable(err);
      });
    },
    health() {
      return {
        status,
        last_error: lastError,
        last_error_at: lastErrorAt,
        last_success_at: lastSuccessAt,
        backlog: { events: spool.events, bytes: spool.bytes },
      };
    },
    async close() {
      if (closing) return;
      closing = true;
      await batcher.close();
      stopping = true;
      if (sleepTimer) clearTimeout(sleepTimer);
      wake?.();
      await replayDone;
      await sink.close();
    },
  };
}
