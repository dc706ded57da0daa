import { defineAction, parseDuration } from '../action.ts';

// circuit-breaker: counts the upstream's answers over `window_duration` (in `num_buckets`
// buckets); once at least `volume_threshold` answers were counted and the share of 5xx among
// them reaches `error_threshold`, it opens for `tripped_duration`: requests get 503 without
// reaching the upstream (or, with `enforce: false`, go through as `allow_while_open`). Then it
// closes with its counts reset. State lives in this process, per endpoint and action config.

interface Config {
  error_threshold: number;
  volume_threshold?: number;
  window_duration?: string;
  tripped_duration?: string;
  num_buckets?: number;
  enforce?: boolean;
}

interface Breaker {
  buckets: { start: number; total: number; errors: number }[];
  openUntil: number;
}

function durationOf(
  text: string | undefined,
  fallbackMs: number,
  field: string,
  fail: (f: string, m: string) => never,
) {
  if (text === undefined) return fallbackMs;
  const ms = parseDuration(text);
  if (ms === undefined || ms < 1 || ms > 3_600_000)
    fail(field, `'${text}' is not a duration from 1ms to 1h`);
  return ms;
}

export const CIRCUIT_BREAKER = defineAction<Config>({
  type: 'circuit-breaker',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['error_threshold'],
    properties: {
      error_threshold: { type: 'number', minimum: 0, maximum: 1 },
      volume_threshold: { type: 'integer', minimum: 1, maximum: 1_000_000 },
      window_duration: { type: 'string', maxLength: 32 },
      tripped_duration: { type: 'string', maxLength: 32 },
      num_buckets: { type: 'integer', minimum: 1, maximum: 128 },
      enforce: { type: 'boolean' },
    },
  },
  compile(config, ctx) {
    const windowMs = durationOf(config.window_duration, 10_000, 'window_duration', ctx.fail);
    const trippedMs = durationOf(config.tripped_duration, 10_000, 'tripped_duration', ctx.fail);
    const numBuckets = config.num_buckets ?? 10;
    const bucketMs = windowMs / numBuckets;
    const volume = config.volume_threshold ?? 10;
    const enforce = config.enforce ?? true;
    const key = `circuit-breaker\u0000${JSON.stringify(config)}`;
    return (x) => {
      const stateKey = `${key}\u0000${x.endpointId}`;
      let breaker = x.services.state.get(stateKey) as Breaker | undefined;
      if (breaker === undefined) {
        breaker = { buckets: [], openUntil: 0 };
        x.services.state.set(stateKey, breaker);
      }
      const b = breaker;
      const now = x.services.now();
      if (b.openUntil > now) {
        x.decisions.circuitBreaker = enforce ? 'block' : 'allow_while_open';
        if (!enforce) return 'continue';
        x.answer = {
          statusCode: 503,
          headers: { 'content-type': ['text/plain'] },
          body: 'Service Unavailable: the circuit breaker is open.\n',
        };
        return 'stop';
      }
      if (b.openUntil !== 0) {
        b.openUntil = 0;
        b.buckets = [];
      }
      x.decisions.circuitBreaker = 'allow';
      x.afterResponse.push((statusCode) => {
        const at = x.services.now();
        b.buckets = b.buckets.filter((k) => k.start > at - windowMs);
        let bucket = b.buckets[b.buckets.length - 1];
        if (bucket === undefined || at - bucket.start >= bucketMs) {
          bucket = { start: at, total: 0, errors: 0 };
          b.buckets.push(bucket);
        }
        bucket.total++;
        if (statusCode >= 500) bucket.errors++;
        const total = b.buckets.reduce((n, k) => n + k.total, 0);
        const errors = b.buckets.reduce((n, k) => n + k.errors, 0);
        if (total >= volume && errors / total >= config.error_threshold)
          b.openUntil = at + trippedMs;
      });
      return 'continue';
    };
  },
});
