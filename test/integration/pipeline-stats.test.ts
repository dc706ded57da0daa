import { beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { TOP_LEVEL_ROUTES } from '../../src/control-plane/api/resources.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { apiClient, TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { openSse } from '../helpers/sse.ts';

const HTTP = 'http_request_complete.v0';

/** The stats without their time: equal when nothing of the account moved. */
const counters = ({ at: _at, ...rest }: Record<string, unknown>) => rest;

describe('GET /pipeline/stats: each account sees its own counters, never the service’s', () => {
  const ctx = useTestService(undefined, { INGEST_TOKENS: TEST_INGEST_TOKEN });
  let accountA: string;
  let accountB: string;
  let callB: ReturnType<typeof apiClient>;
  const ids = { a: { all: '', tls: '', destination: '' }, b: { all: '', destination: '' } };

  async function subscription(
    call: ReturnType<typeof apiClient>,
    destinationId: string,
    filter: string,
  ) {
    const created = await call('POST', '/event_subscriptions', {
      sources: [{ type: HTTP, filter, fields: [] }],
      destination_ids: [destinationId],
    });
    expect(created.status).toBe(201);
    return created.body.id as string;
  }

  async function destination(call: ReturnType<typeof apiClient>, path: string) {
    const created = await call('POST', '/event_destinations', { target: { file: { path } } });
    expect(created.status).toBe(201);
    return created.body.id as string;
  }

  /** Publishes `count` HTTP events of `account`; answers how many are on port 443. */
  async function publish(account: string, count: number, seed: number) {
    const events = generateEvents(count, { accounts: [account], tcpShare: 0, seed });
    await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publish(events);
    return events.filter((event) => (event.payload.value as any).conn.serverPort === 443).length;
  }

  const statsOf = async (call: ReturnType<typeof apiClient>) => {
    const answer = await call('GET', '/pipeline/stats');
    expect(answer.status).toBe(200);
    return answer.body;
  };
  const receivedTotal = async () => {
    const text = await (await fetch(`${ctx.service.url}/metrics`)).text();
    return Number(/^agent_ingress_events_received_total (\d+)$/m.exec(text)?.[1]);
  };

  beforeAll(async () => {
    accountA = (await ctx.api('GET', '/account')).body.id;
    ids.a.destination = await destination(ctx.api, 'stats-a');
    ids.a.all = await subscription(ctx.api, ids.a.destination, '');
    ids.a.tls = await subscription(ctx.api, ids.a.destination, 'conn.server_port == 443');
    accountB = await createAccount(ctx.service.db);
    const keyB = (await mintApiKey(ctx.service.db, { accountId: accountB }, null, ctx.service.url))
      .token!;
    callB = apiClient(ctx.service.url, keyB);
    ids.b.destination = await destination(callB, 'stats-b');
    ids.b.all = await subscription(callB, ids.b.destination, '');
    await ctx.service.pipeline.reload();
  });

  it('moves A’s counters by exactly A’s events, and B’s not at all', async () => {
    const beforeA = await statsOf(ctx.api);
    const beforeB = await statsOf(callB);
    const beforeTotal = await receivedTotal();
    const on443 = await publish(accountA, 40, 1);
    expect(on443).toBeGreaterThan(0);
    const afterA = await statsOf(ctx.api);
    expect(afterA).toMatchObject({
      account_id: accountA,
      events_received: beforeA.events_received + 40,
      events_matched: beforeA.events_matched + 40,
      events_rejected: beforeA.events_rejected,
      // One record per event: both subscriptions share the destination and the projection.
      records_delivered: beforeA.records_delivered + 40,
      backlog_records: 0,
    });
    const subscriptions = Object.fromEntries(
      afterA.subscriptions.map((s: any) => [s.id, s.events_matched]),
    );
    const before = Object.fromEntries(
      beforeA.subscriptions.map((s: any) => [s.id, s.events_matched]),
    );
    expect(subscriptions).toEqual({
      [ids.a.all]: before[ids.a.all] + 40,
      [ids.a.tls]: before[ids.a.tls] + on443,
    });
    expect(afterA.destinations).toEqual([
      expect.objectContaining({
        id: ids.a.destination,
        status: 'ok',
        records_delivered: beforeA.destinations[0].records_delivered + 40,
      }),
    ]);
    // B: nothing moved, and nothing of A is named.
    const afterB = await statsOf(callB);
    expect(counters(afterB)).toEqual(counters(beforeB));
    expect(afterB.subscriptions.map((s: any) => s.id)).toEqual([ids.b.all]);
    expect(afterB.destinations.map((d: any) => d.id)).toEqual([ids.b.destination]);
    expect(JSON.stringify(afterB)).not.toContain(accountA);
    // /metrics, the operator's, stays service-wide.
    expect(await receivedTotal()).toBe(beforeTotal + 40);
  });

  it('counts B’s events for B only, and its rejected requests', async () => {
    const beforeA = await statsOf(ctx.api);
    const beforeB = await statsOf(callB);
    await publish(accountB, 25, 2);
    const bad = generateEvents(6, { accounts: [accountB], tcpShare: 0, seed: 3 });
    bad[5].eventId = 'not a valid id';
    const refused = await ingestClient(ctx.service.url, TEST_INGEST_TOKEN)
      .publish(bad)
      .catch((error) => error);
    expect(refused).toBeInstanceOf(Error);
    const afterB = await statsOf(callB);
    expect(afterB).toMatchObject({
      events_received: beforeB.events_received + 25,
      events_matched: beforeB.events_matched + 25,
      events_rejected: beforeB.events_rejected + 6,
      records_delivered: beforeB.records_delivered + 25,
      subscriptions: [
        { id: ids.b.all, events_matched: beforeB.subscriptions[0].events_matched + 25 },
      ],
    });
    expect(counters(await statsOf(ctx.api))).toEqual(counters(beforeA));
  });

  it('answers exactly the fields /openapi.json declares', async () => {
    const declared = TOP_LEVEL_ROUTES.find((route) => route.name === 'pipeline.stats')!
      .response as any;
    const keys = (schema: any) => Object.keys(schema.properties).sort();
    const stats = await statsOf(ctx.api);
    expect(Object.keys(stats).sort()).toEqual(keys(declared));
    expect(stats.destinations.length).toBeGreaterThan(0);
    for (const destination of stats.destinations)
      expect(Object.keys(destination).sort()).toEqual(keys(declared.properties.destinations.items));
    for (const subscription of stats.subscriptions)
      expect(Object.keys(subscription).sort()).toEqual(
        keys(declared.properties.subscriptions.items),
      );
  });

  it('streams the account’s counters every second over Server-Sent Events', async () => {
    const live = await openSse(`${ctx.service.url}/pipeline/stats`, {
      headers: { authorization: `Bearer ${TEST_BOOTSTRAP_KEY}`, accept: 'text/event-stream' },
    });
    const first = await live.next();
    expect(first?.event).toBe('stats');
    expect(first?.data.account_id).toBe(accountA);
    await publish(accountA, 5, 4);
    await publish(accountB, 7, 5);
    const second = await live.next(3_000);
    expect(second?.data.events_received).toBe(first?.data.events_received + 5);
    live.close();
  });
});
