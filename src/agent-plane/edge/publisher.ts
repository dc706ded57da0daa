import { setTimeout as sleep } from 'node:timers/promises';
import type { Pipeline } from '../../data-plane/pipeline/pipeline.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';

// The edge's events enter the pipeline in process, as a Publish would (admission, workers,
// destinations, durability), without an HTTP round trip. A client's response never waits for
// its event; shutdown does (drain), and a retriable refusal (a full pipeline) is retried.
// Events completing close together go as one Publish: one encoded PublishRequest per event, and
// concatenated PublishRequests are one PublishRequest (protobuf merges repeated fields), so a
// batch is their bytes end to end: one worker task for many requests instead of one each.
// The gathering is done here, where nobody waits for it: the destinations' batchers write at
// the end of the loop's turn by default (BATCH_LINGER_MS 0), so that a client waiting for its
// Publish's acknowledgement does not wait for more records to come (decisions#group-commit).

const ATTEMPTS = 5;
const BACKOFF_MS = 200;
/** How long the edge's events gather into one Publish (~5 events at 1,000 requests/s). */
const LINGER_MS = 5;
const MAX_EVENTS = 500;
const MAX_BYTES = 1024 * 1024;

/** Hands edge events to the pipeline and remembers those in flight. */
export interface EdgePublisher {
  /** `request`: a PublishRequest of one event. */
  publish(request: Uint8Array): void;
  /** Resolves once every event handed over so far is durable (or given up on). */
  drain(): Promise<void>;
}

export function createEdgePublisher(pipeline: Pipeline, logger: Logger): EdgePublisher {
  const inFlight = new Set<Promise<void>>();
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | undefined;

  async function deliver(request: Uint8Array, events: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const claim = pipeline.admit();
        try {
          await pipeline.publish(request, Date.now(), claim);
        } finally {
          claim.end();
        }
        return;
      } catch (error) {
        const appError = AppError.from(error);
        if (!appError.retriable || attempt === ATTEMPTS) {
          logger.error({ err: error, code: appError.code, events }, 'edge events not delivered');
          return;
        }
        await sleep(BACKOFF_MS * attempt);
      }
    }
  }

  function flush(): void {
    clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return;
    const delivery = deliver(Buffer.concat(pending), pending.length);
    pending = [];
    pendingBytes = 0;
    inFlight.add(delivery);
    void delivery.finally(() => inFlight.delete(delivery));
  }

  return {
    publish(request) {
      pending.push(request);
      pendingBytes += request.length;
      if (pending.length >= MAX_EVENTS || pendingBytes >= MAX_BYTES) flush();
      else timer ??= setTimeout(flush, LINGER_MS);
    },
    async drain() {
      flush();
      await Promise.all(inFlight);
    },
  };
}
