import type { CompiledExpression } from '../../../data-plane/filter/index.ts';
import { defineAction, parseDuration } from '../action.ts';
import { type Exchange, setResult } from '../exchange.ts';
import { evaluateValue } from '../interpolate.ts';

// rate-limit (sliding window): each bucket — the endpoint, the action's `name`, and the values
// of its `bucket_key` expressions — admits `capacity` requests per `rate`; past it, 429 with
// Retry-After (or only the result, with `enforce: false`). The window is the previous and the
// current fixed window, the previous weighted by how much of it still overlaps (the estimate
// Cloudflare and nginx's limit_req describe). Buckets live in this process, as ngrok's are per
// ingress server: with N instances a client spread over them gets up to N × capacity.

interface Config {
  name: string;
  enforce?: boolean;
  algorithm: 'sliding_window';
  capacity: number;
  rate: string;
  bucket_key: string[];
}

interface Bucket {
  windowStart: number;
  previous: number;
  current: number;
}

const RATE_LIMITED = Object.freeze({
  code: 'ERR_RATE_LIMITED',
  message: 'The rate limit was exceeded.',
});

/** The most buckets one action keeps; beyond, the oldest bucket is forgotten. */
const MAX_BUCKETS = 100_000;

/** Counts one request in `bucket` at `now`; the estimate before counting it. */
export function slidingWindow(bucket: Bucket, now: number, windowMs: number): number {
  const elapsedWindows = Math.floor((now - bucket.windowStart) / windowMs);
  if (elapsedWindows >= 1) {
    bucket.previous = elapsedWindows === 1 ? bucket.current : 0;
    bucket.current = 0;
    bucket.windowStart += elapsedWindows * windowMs;
  }
  const overlap = 1 - (now - bucket.windowStart) / windowMs;
  return bucket.previous * overlap + bucket.current;
}

export const RATE_LIMIT = defineAction<Config>({
  type: 'rate-limit',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['name', 'algorithm', 'capacity', 'rate', 'bucket_key'],
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 128 },
      enforce: { type: 'boolean' },
      algorithm: { enum: ['sliding_window'] },
      capacity: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
      rate: { type: 'string', maxLength: 32 },
      bucket_key: { type: 'array', maxItems: 8, items: { type: 'string', maxLength: 1024 } },
    },
  },
  compile(config, ctx) {
    const windowMs = parseDuration(config.rate);
    if (windowMs === undefined || windowMs < 1 || windowMs > 24 * 3_600_000) {
      return ctx.fail('rate', `'${config.rate}' is not a duration from 1ms to 24h (e.g. 60s, 1m)`);
    }
    const keys: CompiledExpression[] = config.bucket_key.map((k, i) =>
      ctx.expression(k, `bucket_key[${i}]`),
    );
    const enforce = config.enforce ?? true;
    const keyOf = (values: unknown) =>
      keys.length === 1
        ? String(evaluateValue(keys[0], values) ?? '')
        : keys.map((k) => String(evaluateValue(k, values) ?? '')).join('\u0000');
    // The buckets of the last endpoint and process state it ran for (found once, not per request).
    let last: { state: Map<string, unknown>; endpointId: string; buckets: Map<string, Bucket> } = {
      state: new Map(),
      endpointId: '',
      buckets: new Map(),
    };
    const bucketsOf = (x: Exchange) => {
      if (last.state !== x.services.state || last.endpointId !== x.endpointId) {
        const stateKey = `rate-limit\u0000${x.endpointId}\u0000${config.name}`;
        let buckets = x.services.state.get(stateKey) as Map<string, Bucket> | undefined;
        if (buckets === undefined) {
          buckets = new Map();
          x.services.state.set(stateKey, buckets);
        }
        last = { state: x.services.state, endpointId: x.endpointId, buckets };
      }
      return last.buckets;
    };
    return (x) => {
      const key = keyOf(x.values);
      const buckets = bucketsOf(x);
      const now = x.services.now();
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        if (buckets.size >= MAX_BUCKETS) buckets.delete(buckets.keys().next().value as string);
        bucket = { windowStart: now, previous: 0, current: 0 };
        buckets.set(key, bucket);
      }
      const limited = slidingWindow(bucket, now, windowMs) >= config.capacity;
      if (!limited) bucket.current++;
      setResult(
        x,
        'rate-limit',
        limited ? { bucket_key: key, limited, error: RATE_LIMITED } : { bucket_key: key, limited },
      );
      if (!limited || !enforce) return 'continue';
      const retryAfter = Math.max(1, Math.ceil((bucket.windowStart + windowMs - now) / 1000));
      x.answer = {
        statusCode: 429,
        headers: { 'retry-after': [String(retryAfter)], 'content-type': ['text/plain'] },
        body: 'Too Many Requests\n',
      };
      return 'stop';
    };
  },
});
