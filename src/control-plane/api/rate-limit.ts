import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../shared/errors.ts';

// A token bucket per API key: `burst` requests at once, refilled at `perSecond`. Buckets live in
// a Map kept in least-recently-used order (a hit moves its key to the end); a bucket untouched
// for burst/perSecond seconds is full again, which is the same as having no bucket, so the sweep
// drops such buckets from the front. Memory is bounded by the keys active in that window and,
// as a backstop, by `maxKeys` (dropping a partly used bucket only gives that key a fresh burst).
//
// Not @fastify/rate-limit: it would be a new dependency for ~60 lines, its key must be derived
// before our auth hook has run unless it is moved to a later hook, and its 429 body needs an
// errorResponseBuilder to match docs/decisions.md#error-body; here the limit is one hook after authentication
// that throws our own AppError, so the error handler writes the standard body.

/** The limit's settings: the sustained rate and the burst a key may spend at once. */
export interface RateLimitOptions {
  perSecond: number;
  burst: number;
  /** Most buckets kept at once; the least recently used beyond it are dropped. */
  maxKeys?: number;
  /** Monotonic clock in milliseconds; performance.now unless given (tests). */
  now?: () => number;
}

/** The verdict for one request: allowed, or refused with whole seconds to wait (≥ 1). */
export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/** The per-key token buckets; `take` spends one token of `key` or says when one is available. */
export function createRateLimiter(options: RateLimitOptions) {
  const { perSecond, burst } = options;
  const maxKeys = options.maxKeys ?? 100_000;
  const now = options.now ?? (() => performance.now());
  const refillMs = (burst / perSecond) * 1000;
  const buckets = new Map<string, Bucket>();

  // Oldest first: stop at the first bucket that may still be short of tokens.
  function sweep(at: number): void {
    for (const [key, bucket] of buckets) {
      if (at - bucket.at < refillMs && buckets.size <= maxKeys) return;
      buckets.delete(key);
    }
  }

  function take(key: string): RateDecision {
    const at = now();
    sweep(at);
    const bucket = buckets.get(key) ?? { tokens: burst, at };
    buckets.delete(key);
    bucket.tokens = Math.min(burst, bucket.tokens + ((at - bucket.at) / 1000) * perSecond);
    bucket.at = at;
    buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    const seconds = (1 - bucket.tokens) / perSecond;
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(seconds)) };
  }

  return { take, size: () => buckets.size };
}

/** The limiter type, for callers that build one. */
export type RateLimiter = ReturnType<typeof createRateLimiter>;

/**
 * An onRequest hook that runs after authentication: limits each API key (not each account, so
 * one runaway automation key does not lock out its account's other keys) and answers 429
 * ERR_RATE_LIMITED with Retry-After when the key's bucket is empty.
 */
export function createRateLimitHook(options: RateLimitOptions) {
  const limiter = createRateLimiter(options);
  return async function rateLimit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const decision = limiter.take(request.caller.keyId);
    if (decision.allowed) return;
    const wait = decision.retryAfterSeconds;
    reply.header('retry-after', String(wait));
    throw new AppError(
      'ERR_RATE_LIMITED',
      `too many requests for this API key (limit ${options.perSecond}/s, burst ${options.burst}); retry in ${wait} s`,
      { retry_after_seconds: wait },
    );
  };
}
