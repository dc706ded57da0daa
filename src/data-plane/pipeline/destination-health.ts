import type { Logger } from '../../shared/logger.ts';
import { SinkError } from '../sinks/types.ts';

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

/** How long a destination waits between attempts. */
export interface RetryPolicy {
  /** Backoff for retriable errors: baseMs · 2^attempt, capped at maxMs, with jitter. */
  retry: { baseMs: number; maxMs: number };
  /** Delay between attempts while parked on a permanent error. */
  parkRetryMs: number;
  /** Source of jitter in [0, 1). */
  random: () => number;
}

/**
 * One destination's status and the times behind it: each write's outcome moves it, each change
 * of status is logged once, and the delay before the next attempt follows from it.
 */
export class HealthTracker {
  status: DestinationStatus;
  lastError: string | null = null;
  lastErrorAt: string | null = null;
  lastSuccessAt: string | null = null;
  /** Failed attempts since the last success: the backoff's exponent. */
  private attempt = 0;
  private readonly log: Logger;
  private readonly policy: RetryPolicy;

  constructor(log: Logger, policy: RetryPolicy, status: DestinationStatus) {
    this.log = log;
    this.policy = policy;
    this.status = status;
  }

  set(next: DestinationStatus): void {
    const from = this.status;
    if (next === from) return;
    this.status = next;
    if (next === 'ok') this.log.info({ from }, 'destination recovered');
    else if (next === 'parked') this.log.error({ from, err: this.lastError }, 'destination parked');
    else if (from === 'ok') this.log.warn({ err: this.lastError }, 'destination retrying');
  }

  succeeded(): void {
    this.lastSuccessAt = new Date().toISOString();
    this.attempt = 0;
  }

  /** Records a failed write; returns its description. */
  failed(err: unknown): string {
    this.lastError = err instanceof Error ? err.message : String(err);
    this.lastErrorAt = new Date().toISOString();
    // Anything but a permanent SinkError is retried on the fast schedule: a bug in a sink must not park.
    const permanent = err instanceof SinkError && !err.retriable;
    this.set(permanent ? 'parked' : 'retrying');
    return this.lastError;
  }

  /** The wait before the next attempt: slow while parked, jittered exponential backoff otherwise. */
  nextDelay(): number {
    if (this.status === 'parked') return this.policy.parkRetryMs;
    const { baseMs, maxMs } = this.policy.retry;
    const exp = Math.min(maxMs, baseMs * 2 ** this.attempt);
    this.attempt++;
    return exp / 2 + (exp / 2) * this.policy.random();
  }

  /** The health as served, with the spool's backlog. */
  snapshot(backlog: DestinationHealth['backlog']): DestinationHealth {
    return {
      status: this.status,
      last_error: this.lastError,
      last_error_at: this.lastErrorAt,
      last_success_at: this.lastSuccessAt,
      backlog,
    };
  }
}
