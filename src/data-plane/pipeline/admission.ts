import { AppError } from '../../shared/errors.ts';

/**
 * One admitted Publish or PublishStream: its request slot and the bytes it holds in the service
 * (taken before they are read or kept, given back once its events are durable or refused).
 */
export interface Claim {
  /**
   * Holds `bytes` more, or throws and holds nothing more: ERR_BACKPRESSURE when the budget is in
   * use (retry later), ERR_BODY_TOO_LARGE when this request alone would need more than all of it.
   */
  take(bytes: number): void;
  /** Gives back `bytes` of what this claim holds. */
  give(bytes: number): void;
  /** Gives back the slot and every byte held; later calls do nothing. */
  end(): void;
}

/** The ingest's bounds: requests in flight (unary and open streams) and the bytes they hold. */
export interface Admission {
  /** A claim for one request or stream; ERR_BACKPRESSURE when every slot is taken. */
  enter(): Claim;
  /** Claims open now. */
  readonly requests: number;
  /** Bytes all claims hold now. */
  readonly bytes: number;
  /** Refuses new claims (ERR_UNAVAILABLE); resolves once every open claim has ended. */
  close(): Promise<void>;
}

/** Admission within MAX_INFLIGHT_REQUESTS slots and MAX_INFLIGHT_BYTES bytes. */
export function createAdmission(limits: { maxRequests: number; maxBytes: number }): Admission {
  let requests = 0;
  let bytes = 0;
  let closing = false;
  let idle: (() => void) | undefined;

  function enter(): Claim {
    if (closing) throw new AppError('ERR_UNAVAILABLE', 'the service is shutting down; retry');
    if (requests >= limits.maxRequests) {
      throw new AppError('ERR_BACKPRESSURE', 'too many requests in flight; retry later');
    }
    requests++;
    let held = 0;
    let ended = false;
    return {
      take(n) {
        if (ended) throw new AppError('ERR_UNAVAILABLE', 'the request has ended');
        if (held + n > limits.maxBytes) {
          throw new AppError(
            'ERR_BODY_TOO_LARGE',
            `the request needs more than the bytes in flight allowed (MAX_INFLIGHT_BYTES ${limits.maxBytes}); split it`,
          );
        }
        if (bytes + n > limits.maxBytes) {
          throw new AppError(
            'ERR_BACKPRESSURE',
            `the service holds its limit of bytes in flight (MAX_INFLIGHT_BYTES ${limits.maxBytes}); retry later`,
          );
        }
        bytes += n;
        held += n;
      },
      give(n) {
        const given = Math.min(n, held);
        held -= given;
        bytes -= given;
      },
      end() {
        if (ended) return;
        ended = true;
        bytes -= held;
        held = 0;
        requests--;
        if (requests === 0) idle?.();
      },
    };
  }

  return {
    enter,
    get requests() {
      return requests;
    },
    get bytes() {
      return bytes;
    },
    async close() {
      closing = true;
      if (requests > 0) await new Promise<void>((resolve) => (idle = resolve));
    },
  };
}
