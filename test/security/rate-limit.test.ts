import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { createRateLimiter } from '../../src/control-plane/api/rate-limit.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { expectError } from '../helpers/expect-error.ts';
import { type ApiClient, type ApiResponse, apiClient, useTestService } from '../helpers/service.ts';
import { pgliteStore } from '../helpers/stores.ts';

// Small numbers so a burst is a handful of requests: 5 at once, then 2 per second.
const PER_SECOND = 2;
const BURST = 5;

describe('per-API-key token bucket (unit, fake clock)', () => {
  it('allows the burst, refuses with whole seconds to wait, refills at the rate', () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 2, burst: 3, now: () => now });
    expect([1, 2, 3].map(() => limiter.take('k').allowed)).toEqual([true, true, true]);
    expect(limiter.take('k')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    now += 250; // half a token
    expect(limiter.take('k')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    now += 500; // one and a half
    expect(limiter.take('k').allowed).toBe(true);
    expect(limiter.take('k').allowed).toBe(false);
    expect(limiter.take('other').allowed).toBe(true);
  });

  it('rounds a long wait up and never answers less than one second', () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 0.25, burst: 1, now: () => now });
    expect(limiter.take('k').allowed).toBe(true);
    expect(limiter.take('k')).toEqual({ allowed: false, retryAfterSeconds: 4 });
    now += 3_100;
    expect(limiter.take('k')).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });

  it('forgets idle keys (their bucket would be full) and caps how many it keeps', () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 10, burst: 10, maxKeys: 1000, now: () => now });
    for (let i = 0; i < 1000; i++) limiter.take(`key-${i}`);
    expect(limiter.size()).toBe(1000);
    now += 1_000; // burst / perSecond: every bucket is full again
    limiter.take('fresh');
    expect(limiter.size()).toBe(1);
    for (let i = 0; i < 5000; i++) limiter.take(`flood-${i}`);
    expect(limiter.size()).toBeLessThanOrEqual(1001);
  });

  it('keeps a busy key’s spent bucket while sweeping idle ones', () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 1, burst: 2, now: () => now });
    limiter.take('idle');
    limiter.take('busy');
    limiter.take('busy');
    now += 1_500;
    expect(limiter.take('busy').allowed).toBe(true); // 1.5 tokens refilled
    now += 600; // 'idle' untouched for 2.1 s ≥ 2 s: swept; 'busy' spent 0.6 s ago: kept
    expect(limiter.take('busy').allowed).toBe(true);
    expect(limiter.take('busy').allowed).toBe(false);
    expect(limiter.size()).toBe(1);
  });
});

describe('REST rate limit per API key', () => {
  const t = useTestService(pgliteStore, {
    RATE_LIMIT_PER_SECOND: String(PER_SECOND),
    RATE_LIMIT_BURST: String(BURST),
  });

  /** A new key minted in the store, so making it spends no request budget. */
  async function newKey(accountId?: string): Promise<ApiClient> {
    const account = accountId ?? (await createAccount(t.service.db));
    const key = await mintApiKey(t.service.db, { accountId: account }, null, t.service.url);
    return apiClient(t.service.url, key.token!);
  }

  it('reads its settings from RATE_LIMIT_PER_SECOND and RATE_LIMIT_BURST', () => {
    expect(loadConfig({})).toMatchObject({ rateLimitPerSecond: 50, rateLimitBurst: 100 });
    expect(() => loadConfig({ RATE_LIMIT_BURST: '0' })).toThrow(/RATE_LIMIT_BURST/);
    expect(() => loadConfig({ RATE_LIMIT_PER_SECOND: 'fast' })).toThrow(/RATE_LIMIT_PER_SECOND/);
  });

  it('answers 429 with the error body and Retry-After past the burst; other keys go on', async () => {
    const caller = await newKey();
    const burst = await Promise.all(
      Array.from({ length: BURST }, () => caller('GET', '/agent_ingresses')),
    );
    expect(burst.map((r) => r.status)).toEqual(Array(BURST).fill(200));

    const refused = await caller('GET', '/agent_ingresses');
    expectError(refused, 429, 'ERR_RATE_LIMITED', 'retry in');
    const retryAfter = refused.headers.get('retry-after');
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(refused.body.details.retry_after_seconds).toBe(Number(retryAfter));
    // Every route of the key is limited, writes too, and 405 answers of known paths.
    expectError(await caller('POST', '/api_keys', {}), 429, 'ERR_RATE_LIMITED');
    expectError(await caller('PUT', '/api_keys'), 429, 'ERR_RATE_LIMITED');

    // Another key of another account, and another key of the same account: their own buckets.
    expect((await t.api('GET', '/agent_ingresses')).status).toBe(200);
    const account = (await t.service.db.query<{ id: string }>('SELECT id FROM accounts')).rows;
    expect((await (await newKey(account[0].id))('GET', '/api_keys')).status).toBe(200);

    await sleep(Number(retryAfter) * 1000 + 50);
    expect((await caller('GET', '/agent_ingresses')).status).toBe(200);
  });

  it('spends nothing on unauthenticated requests: bad tokens are 401, never 429', async () => {
    const stranger = apiClient(t.service.url, 'aik_not-a-real-key');
    const answers: ApiResponse[] = [];
    for (let i = 0; i < BURST * 3; i++) answers.push(await stranger('GET', '/agent_ingresses'));
    for (const answer of answers) expectError(answer, 401, 'ERR_UNAUTHORIZED');
    const caller = await newKey();
    expect((await caller('GET', '/agent_ingresses')).status).toBe(200);
  });

  it('limits the sustained rate, not only the burst', async () => {
    const caller = await newKey();
    const started = Date.now();
    let allowed = 0;
    while (Date.now() - started < 2_000) {
      const response = await caller('GET', '/api_keys');
      if (response.status === 200) allowed++;
      else expectError(response, 429, 'ERR_RATE_LIMITED');
      await sleep(20);
    }
    const seconds = (Date.now() - started) / 1000;
    // burst + rate × time, with one token of slack for timing at the edges.
    expect(allowed).toBeGreaterThanOrEqual(BURST + Math.floor(PER_SECOND * seconds) - 1);
    expect(allowed).toBeLessThanOrEqual(BURST + Math.ceil(PER_SECOND * seconds) + 1);
  });
});
