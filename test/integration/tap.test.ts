import { beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { LONG_LIVED_PER_ACCOUNT } from '../../src/control-plane/api/long-lived.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { generateEvents } from '../helpers/events.ts';
import { expectError } from '../helpers/expect-error.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { apiClient, TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { openSse, type SseEvent } from '../helpers/sse.ts';

const HTTP = 'http_request_complete.v0';
const FILTER = 'conn.server_port == 443';

describe('taps: what a subscription (or a filter not saved yet) matches, live and bounded', () => {
  const ctx = useTestService(undefined, { INGEST_TOKENS: TEST_INGEST_TOKEN });
  let accountA: string;
  let subscriptionA: string;
  let keyB: string;
  let subscriptionB: string;
  const auth = (key = TEST_BOOTSTRAP_KEY) => ({ authorization: `Bearer ${key}` });

  /** Publishes `count` traffic events of `account` (HTTP only, all ports). */
  async function publish(account: string, count: number, seed = 1, perRequest = 10) {
    const events = generateEvents(count, { accounts: [account], tcpShare: 0, seed });
    const client = ingestClient(ctx.service.url, TEST_INGEST_TOKEN);
    for (let i = 0; i < count; i += perRequest)
      await client.publish(events.slice(i, i + perRequest));
    return events;
  }

  async function subscribe(call: ReturnType<typeof apiClient>) {
    const destination = await call('POST', '/event_destinations', {
      target: { file: { path: `tap-${Math.random().toString(36).slice(2)}` } },
    });
    const subscription = await call('POST', '/event_subscriptions', {
      sources: [{ type: HTTP, filter: FILTER, fields: ['conn.server_port', 'conn.server_name'] }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
    return subscription.body.id as string;
  }

  beforeAll(async () => {
    accountA = (await ctx.api('GET', '/account')).body.id;
    subscriptionA = await subscribe(ctx.api);
    const accountB = await createAccount(ctx.service.db);
    keyB = (await mintApiKey(ctx.service.db, { accountId: accountB }, null, ctx.service.url))
      .token!;
    subscriptionB = await subscribe(apiClient(ctx.service.url, keyB));
    await ctx.service.pipeline.reload();
  });

  const events = (all: SseEvent[]) => all.filter((e) => e.event === 'event').map((e) => e.data);

  it('streams the subscription’s matches after its field selection, then ends at max_seconds', async () => {
    const tap = await openSse(
      `${ctx.service.url}/event_subscriptions/${subscriptionA}/tap?max_seconds=2&rate=100`,
      {
        headers: auth(),
      },
    );
    expect(tap.status).toBe(200);
    expect(tap.headers.get('ngrok-operation-id')).toMatch(/^op_/);
    expect(await tap.next()).toEqual({ event: 'open', data: { rate: 100, max_seconds: 2 } });
    expect(ctx.service.pipeline.taps.specs()).toHaveLength(1);
    const sent = await publish(accountA, 40);
    const expected = sent.filter((e) => (e.payload.value as any).conn.serverPort === 443).length;
    expect(expected).toBeGreaterThan(0);
    const all = await tap.rest(4_000);
    const shown = events(all);
    expect(shown).toHaveLength(expected);
    for (const [index, message] of shown.entries()) {
      expect(message).toMatchObject({ sampled: false, skipped: 0, dropped: 0, shown: index + 1 });
      expect(message.event).toMatchObject({ event_type: HTTP, account_id: accountA });
      expect(message.event.object).toEqual({
        conn: { server_port: 443, server_name: expect.any(String) },
      });
    }
    expect(all.at(-1)).toEqual({
      event: 'end',
      data: { reason: 'max_duration', matched: expected, shown: expected },
    });
    // Closed: the workers get no tap again, so routing is as without the feature.
    expect(ctx.service.pipeline.taps.specs()).toBeUndefined();
  });

  it('holds the rate cap on a busy subscription and says each message is a sample', async () => {
    const tap = await openSse(
      `${ctx.service.url}/event_subscriptions/${subscriptionA}/sources/${HTTP}/tap?rate=2&max_seconds=2`,
      { headers: auth() },
    );
    expect((await tap.next())?.event).toBe('open');
    const started = Date.now();
    for (let i = 0; i < 5; i++) await publish(accountA, 400, 10 + i, 400);
    const all = await tap.rest(4_000);
    const shown = events(all);
    const end = all.at(-1)!;
    expect(end.event).toBe('end');
    expect(Date.now() - started).toBeLessThan(3_500);
    // At most 2 per second over 2 seconds (plus the first tick's token).
    expect(shown.length).toBeGreaterThanOrEqual(2);
    expect(shown.length).toBeLessThanOrEqual(5);
    expect(end.data.matched).toBeGreaterThan(100);
    expect(end.data.shown).toBe(shown.length);
    expect(shown.some((message) => message.sampled)).toBe(true);
    for (const message of shown) expect(message.sampled).toBe(message.skipped > 0);
    // Every matched event is shown, skipped, or still buffered when the tap ended.
    const accounted = shown.length + shown.reduce((sum, message) => sum + message.skipped, 0);
    expect(accounted).toBeLessThanOrEqual(end.data.matched);
    expect(shown.at(-1).matched - accounted).toBeLessThanOrEqual(10); // the buffer's capacity
    expect(shown.at(-1).dropped).toBeGreaterThan(0);
  });

  it('ends every open stream when the client goes away, leaving no tap behind', async () => {
    const tap = await openSse(`${ctx.service.url}/event_subscriptions/${subscriptionA}/tap`, {
      headers: auth(),
    });
    await tap.next();
    expect(ctx.service.pipeline.taps.specs()).toHaveLength(1);
    tap.close();
    await expect.poll(() => ctx.service.pipeline.taps.specs(), { timeout: 2_000 }).toBeUndefined();
  });

  it('previews a filter before it is saved: compiles it first, errors with their position', async () => {
    const bad = await openSse(`${ctx.service.url}/filters/preview`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ type: HTTP, filter: 'conn.server_port == ', fields: [] }),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error_code).toBe('ERR_INVALID_FILTER');
    expect(bad.body.details.position).toMatchObject({ line: 1, column: expect.any(Number) });
    const preview = await openSse(`${ctx.service.url}/filters/preview?max_seconds=2&rate=100`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({
        type: HTTP,
        filter: 'conn.server_port != 443',
        fields: ['conn.server_port'],
      }),
    });
    expect((await preview.next())?.event).toBe('open');
    const sent = await publish(accountA, 30, 3);
    const expected = sent.filter((e) => (e.payload.value as any).conn.serverPort !== 443).length;
    const shown = events(await preview.rest(4_000));
    expect(shown).toHaveLength(expected);
    for (const message of shown) expect(message.event.object.conn.server_port).not.toBe(443);
  });

  it('keeps accounts apart: another account’s subscription is 404, its preview sees none of A’s events', async () => {
    for (const path of [
      `/event_subscriptions/${subscriptionA}/tap`,
      `/event_subscriptions/${subscriptionA}/sources/${HTTP}/tap`,
    ]) {
      const stolen = await openSse(`${ctx.service.url}${path}`, { headers: auth(keyB) });
      expectError(
        { status: stolen.status, body: stolen.body, headers: {} } as any,
        404,
        'ERR_NOT_FOUND',
      );
    }
    const ofB = await openSse(
      `${ctx.service.url}/event_subscriptions/${subscriptionB}/tap?max_seconds=2`,
      {
        headers: auth(keyB),
      },
    );
    const previewB = await openSse(`${ctx.service.url}/filters/preview?max_seconds=2`, {
      method: 'POST',
      headers: { ...auth(keyB), 'content-type': 'application/json' },
      body: JSON.stringify({ type: HTTP }),
    });
    expect((await ofB.next())?.event).toBe('open');
    expect((await previewB.next())?.event).toBe('open');
    await publish(accountA, 50, 4);
    for (const stream of [ofB, previewB]) {
      const all = await stream.rest(4_000);
      expect(events(all)).toEqual([]);
      expect(all.at(-1)?.data).toMatchObject({ matched: 0, shown: 0 });
    }
  });

  it('caps the taps an account may hold open; another account is not held back', async () => {
    const url = `${ctx.service.url}/event_subscriptions/${subscriptionB}/tap`;
    const held = [];
    for (let i = 0; i < LONG_LIVED_PER_ACCOUNT; i++) {
      const tap = await openSse(url, { headers: auth(keyB) });
      expect(tap.status).toBe(200);
      held.push(tap);
    }
    const refused = await openSse(url, { headers: auth(keyB) });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error_code: 'ERR_RATE_LIMITED', details: { limit: 5 } });
    const ofA = await openSse(`${ctx.service.url}/event_subscriptions/${subscriptionA}/tap`, {
      headers: auth(),
    });
    expect(ofA.status).toBe(200);
    for (const tap of [...held, ofA]) tap.close();
    await expect.poll(() => ctx.service.pipeline.taps.specs(), { timeout: 2_000 }).toBeUndefined();
  });

  it('refuses bad bounds, unknown parameters and callers without a key', async () => {
    const url = `${ctx.service.url}/event_subscriptions/${subscriptionA}/tap`;
    for (const query of [
      '?rate=0',
      '?rate=101',
      '?max_seconds=601',
      '?max_seconds=1.5',
      '?token=x',
    ]) {
      const answer = await openSse(`${url}${query}`, { headers: auth() });
      expect(answer.status, query).toBe(400);
      expect(answer.body.error_code).toBe('ERR_INVALID_QUERY');
    }
    const anonymous = await openSse(url);
    expect(anonymous.status).toBe(401);
    const audit = await openSse(`${ctx.service.url}/filters/preview`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'api_key_created.v0' }),
    });
    expect(audit.status).toBe(400);
    const sampled = await openSse(`${ctx.service.url}/filters/preview`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ type: HTTP, sample_rate: 0.5 }),
    });
    expect(sampled.status).toBe(400);
    expect(sampled.body.error_code).toBe('ERR_UNKNOWN_FIELD');
    expect(ctx.service.pipeline.taps.specs()).toBeUndefined();
  });

  it('ends an open tap, saying so, when the service stops: shutdown does not wait for it', async () => {
    const tap = await openSse(
      `${ctx.service.url}/event_subscriptions/${subscriptionA}/tap?max_seconds=600`,
      {
        headers: auth(),
      },
    );
    await tap.next();
    const started = Date.now();
    await ctx.restart();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await tap.rest(1_000)).toEqual([
      { event: 'end', data: { reason: 'shutdown', matched: 0, shown: 0 } },
    ]);
    await ctx.service.pipeline.reload();
  });

  it('taps audit events: what a subscription with audit sources delivers, its account’s only', async () => {
    const auditSubscription = async (call: ReturnType<typeof apiClient>) => {
      const destination = await call('POST', '/event_destinations', {
        target: { file: { path: `tap-audit-${Math.random().toString(36).slice(2)}` } },
      });
      const created = await call('POST', '/event_subscriptions', {
        sources: [{ type: 'api_key_created.v0' }, { type: 'api_key_deleted.v0' }],
        destination_ids: [destination.body.id],
      });
      expect(created.status).toBe(201);
      return created.body.id as string;
    };
    const callB = apiClient(ctx.service.url, keyB);
    const auditA = await auditSubscription(ctx.api);
    const auditB = await auditSubscription(callB);
    await ctx.service.pipeline.reload();
    const open = async (path: string, key?: string) => {
      const stream = await openSse(`${ctx.service.url}${path}?max_seconds=3&rate=100`, {
        headers: auth(key),
      });
      expect((await stream.next())?.event).toBe('open');
      return stream;
    };
    const tap = await open(`/event_subscriptions/${auditA}/tap`);
    const deletedOnly = await open(`/event_subscriptions/${auditA}/sources/api_key_deleted.v0/tap`);
    const ofB = await open(`/event_subscriptions/${auditB}/tap`, keyB);
    const matchedBefore = (await ctx.api('GET', '/pipeline/stats')).body.subscriptions.find(
      (s: { id: string }) => s.id === auditA,
    ).events_matched;
    const key = await ctx.api('POST', '/api_keys', { description: 'tapped' });
    expect(key.status).toBe(201);
    expect(key.body.token).toEqual(expect.any(String));
    const shown = events(await tap.rest(5_000));
    expect(shown).toHaveLength(1);
    expect(shown[0]).toMatchObject({ sampled: false, skipped: 0, matched: 1, shown: 1 });
    expect(shown[0].event).toMatchObject({
      event_type: 'api_key_created.v0',
      account_id: accountA,
      object: { id: key.body.id, description: 'tapped' },
    });
    // The record as the destination got it: the token is shown once, to its creator, never here.
    expect(JSON.stringify(shown[0].event)).not.toContain(key.body.token);
    for (const other of [deletedOnly, ofB]) {
      const all = await other.rest(5_000);
      expect(events(all)).toEqual([]);
      expect(all.at(-1)?.data).toMatchObject({ matched: 0, shown: 0 });
    }
    const stats = (await ctx.api('GET', '/pipeline/stats')).body;
    const matched = stats.subscriptions.find((s: { id: string }) => s.id === auditA);
    expect(matched.events_matched).toBe(matchedBefore + 1);
  });
});
