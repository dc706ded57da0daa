import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { LONG_LIVED_PER_ACCOUNT } from '../../src/control-plane/api/long-lived.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { generateEvents } from '../helpers/events.ts';
import { expectError } from '../helpers/expect-error.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { openSse, type SseStream } from '../helpers/sse.ts';

// Event streams (taps, previews, /pipeline/stats) and destination tests can hold a connection
// for long, on the listener whose MAX_CONNECTIONS REST, ingest and /healthz share. One account
// may hold LONG_LIVED_PER_ACCOUNT of them, all accounts together a quarter of MAX_CONNECTIONS
// (at most 64), and a stats stream ends after max_seconds: no account can take the port.

const MAX_CONNECTIONS = 40;
const SSE = { accept: 'text/event-stream' };

/** A /pipeline/stats event stream of the key's account. */
function statsStream(url: string, token: string, query = '') {
  return openSse(`${url}/pipeline/stats${query}`, {
    headers: { authorization: `Bearer ${token}`, ...SSE },
  });
}

describe('long-lived answers cannot take the listener’s connections', () => {
  const ctx = useTestService(undefined, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    MAX_CONNECTIONS: String(MAX_CONNECTIONS),
  });
  let accountId: string;

  beforeAll(async () => {
    accountId = (await ctx.api('GET', '/account')).body.id;
  });

  /** A key of a new account. */
  async function otherKey(): Promise<string> {
    const account = await createAccount(ctx.service.db);
    return (await mintApiKey(ctx.service.db, { accountId: account }, null, ctx.service.url)).token!;
  }

  it('ends a stats stream after max_seconds with an `end` event', async () => {
    const started = Date.now();
    const live = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY, '?max_seconds=1');
    expect(live.status).toBe(200);
    const events = await live.rest(5_000);
    expect(events[0].event).toBe('stats');
    expect(events.at(-1)).toEqual({ event: 'end', data: { reason: 'max_duration' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it.each([['?max_seconds=0'], ['?max_seconds=601'], ['?max_seconds=x'], ['?forever=1']])(
    'refuses %s',
    async (query) => {
      const refused = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY, query);
      refused.close();
      expectError({ ...refused, body: refused.body }, 400, 'ERR_INVALID_QUERY');
    },
  );

  it('lets one key hold only its share of stats streams: /healthz, ingest and other accounts still answer', async () => {
    const held: SseStream[] = [];
    const statuses: number[] = [];
    try {
      // More than the listener holds: without a share, the port would answer 503 to everyone.
      for (let i = 0; i < MAX_CONNECTIONS + 10; i++) {
        const live = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY);
        statuses.push(live.status);
        if (live.status === 200) held.push(live);
        else expectError({ ...live, body: live.body }, 429, 'ERR_RATE_LIMITED');
      }
      expect(held.length).toBe(LONG_LIVED_PER_ACCOUNT);
      expect((await fetch(`${ctx.service.url}/healthz`)).status).toBe(200);
      const events = generateEvents(3, { accounts: [accountId], tcpShare: 1, seed: 11 });
      const published = await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publish(events);
      expect(published.accepted).toBe(3);
      const other = await statsStream(ctx.service.url, await otherKey());
      expect(other.status).toBe(200);
      other.close();
    } finally {
      for (const live of held) live.close();
    }
    // Closing a stream gives its place back.
    await expect
      .poll(async () => {
        const live = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY);
        live.close();
        return live.status;
      })
      .toBe(200);
  });

  it('lets all accounts together hold a quarter of MAX_CONNECTIONS', async () => {
    const keys = await Promise.all([0, 1, 2].map(() => otherKey()));
    const held: SseStream[] = [];
    try {
      let refused: SseStream | undefined;
      for (const key of keys) {
        for (let i = 0; i < LONG_LIVED_PER_ACCOUNT && refused === undefined; i++) {
          const live = await statsStream(ctx.service.url, key);
          if (live.status === 200) held.push(live);
          else refused = live;
        }
      }
      expect(held.length).toBe(MAX_CONNECTIONS / 4);
      expect(refused?.status).toBe(429);
      expect(refused?.body).toMatchObject({
        error_code: 'ERR_RATE_LIMITED',
        details: { limit: 10 },
      });
    } finally {
      for (const live of held) live.close();
    }
  });

  it('ends a stats stream with an `end` event when the service stops', async () => {
    const live = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY, '?max_seconds=600');
    expect((await live.next())?.event).toBe('stats');
    const [events] = await Promise.all([live.rest(30_000), ctx.restart()]);
    expect(events.at(-1)).toEqual({ event: 'end', data: { reason: 'shutdown' } });
  });

  describe('a destination test waiting on its target', () => {
    let target: Server;
    const connections = new Set<Socket>();

    beforeAll(async () => {
      // A "ClickHouse" that takes connections and never answers.
      target = createServer((socket) => {
        connections.add(socket);
        socket.on('error', () => {});
        socket.on('close', () => connections.delete(socket));
      });
      await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    });
    afterAll(() => {
      for (const socket of connections) socket.destroy();
      target?.close();
    });

    it('takes one of the account’s places until it answers', async () => {
      const port = (target.address() as { port: number }).port;
      const created = await ctx.api('POST', '/event_destinations', {
        target: { clickhouse: { url: `http://127.0.0.1:${port}`, request_timeout_ms: 600_000 } },
      });
      expect(created.status).toBe(201);
      const test = () => ctx.api('POST', `/event_destinations/${created.body.id}/test`);
      const waiting = Array.from({ length: LONG_LIVED_PER_ACCOUNT }, () => test());
      // A probe that gets a place holds it until its close is seen: probe only once the tests
      // are in (each takes its place on arrival; the first one's event has reached the target).
      await expect.poll(() => connections.size, { timeout: 10_000 }).toBeGreaterThan(0);
      // Each waits on the target: once all have their place, the account has none left for a
      // stream (a probe that got one gives it back at once), nor for a sixth test.
      await expect
        .poll(
          async () => {
            const live = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY);
            live.close();
            return live.status;
          },
          { timeout: 10_000 },
        )
        .toBe(429);
      expectError(await test(), 429, 'ERR_RATE_LIMITED');
      // The target goes away: the tests answer (spooled), and their places are free again.
      for (const socket of connections) socket.destroy();
      target.close();
      for (const answer of await Promise.all(waiting)) expect(answer.status).toBe(200);
      const again = await statsStream(ctx.service.url, TEST_BOOTSTRAP_KEY);
      expect(again.status).toBe(200);
      again.close();
    });
  });
});
