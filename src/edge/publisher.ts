import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';

// The edge's events enter the pipeline in process, as a Publish would (admission, workers,
// destinations, durability), without an HTTP round trip. A client's response never waits for
// its event; shutdown does (drain), and a retriable refusal (a full pipeline) is retried.

const ATTEMPTS = 5;
const BACKOFF_MS = 200;

/** Hands edge events to the pipeline and remembers those in flight. */
export interface EdgePublisher {
  publish(request: Uint8Array): void;
  /** Resolves once every event handed over so far is durable (or given up on). */
  drain(): Promise<void>;
}

export function createEdgePublisher(pipeline: Pipeline, logger: Logger): EdgePublisher {
  const inFlight = new Set<Promise<void>>();

  async function deliver(request: Uint8Array): Promise<void> {
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
          logger.error({ err: error, code: appError.code }, 'edge event not delivered');
          return;
        }
        await sleep(BACKOFF_MS * attempt);
      }
    }
  }

  return {
    publish(request) {
      const delivery = deliver(request);
      inFlight.add(delivery);
      void delivery.finally(() => inFlight.delete(delivery));
    },
    async drain() {
      await Promise.all(inFlight);
    },
  };
}
