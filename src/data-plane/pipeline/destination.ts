import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { RecordBlock } from '../sinks/record-block.ts';
import type { Batch, Sink } from '../sinks/types.ts';
import { BatcherFullError, type BatcherOptions, createBatcher } from './batcher.ts';
import { type DestinationHealth, HealthTracker } from './destination-health.ts';
import { type Spool, SpoolFullError } from './spool.ts';
import { SpoolReplay } from './spool-replay.ts';

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

/** Builds a destination and, when its spool holds batches from before a restart, starts replaying them. */
export function createDestination(deps: DestinationDeps): Destination {
  const { id, sink, spool } = deps;
  const log = deps.logger.child({ destination: id });
  const random = deps.random ?? Math.random;
  const policy = { retry: deps.retry, parkRetryMs: deps.parkRetryMs, random };
  const health = new HealthTracker(log, policy, spool.count > 0 ? 'retrying' : 'ok');
  const replay = new SpoolReplay(spool, sink, health);
  const parts: Parts = { sink, spool, health, replay };
  const batcher = createBatcher({ ...deps.batcher, flush: (batch) => flush(batch, parts) });
  let closing = false;
  if (spool.count > 0) {
    log.info({ batches: spool.count, events: spool.events }, 'replaying spool from a previous run');
    replay.ensure();
  }
  return {
    deliver(records) {
      if (closing) return Promise.reject(destinationClosed(id));
      return batcher.add(records).then(receiptOf, (err: unknown) => {
        throw notDurable(err);
      });
    },
    health: () => health.snapshot({ events: spool.events, bytes: spool.bytes }),
    async close() {
      if (closing) return;
      closing = true;
      await batcher.close();
      await replay.stop();
      await sink.close();
    },
  };
}

/** What a flush works with: the sink, the spool in front of it, and their state. */
interface Parts {
  sink: Sink;
  spool: Spool;
  health: HealthTracker;
  replay: SpoolReplay;
}

// Direct write only when nothing is spooled: a spooled batch is older and must reach the sink first.
async function flush(batch: Batch, parts: Parts): Promise<Receipt> {
  const { sink, spool, health } = parts;
  if (spool.count > 0) return toSpool(batch, health.lastError ?? QUEUED, parts);
  try {
    await sink.write(batch);
    health.succeeded();
    health.set('ok');
    return WRITTEN;
  } catch (err) {
    return toSpool(batch, health.failed(err), parts);
  }
}

async function toSpool(
  batch: Batch,
  reason: string,
  { spool, health, replay }: Parts,
): Promise<Receipt> {
  await spool.append(batch);
  // The replay loop may have drained the spool while this append was in flight: not ok any more.
  if (health.status === 'ok') health.set('retrying');
  replay.ensure();
  return { written: false, reason };
}
