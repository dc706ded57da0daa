import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('data plane under faults', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let clickhouse: ClickHouseServer;
  let account: string;

  beforeAll(async () => {
    [store, clickhouse] = await Promise.all([pgliteStore(), startClickHouse()]);
    service = await startTestService(store, {
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      BATCH_LINGER_MS: '10',
      SPOOL_MAX_BYTES: String(4 * 1024 * 1024),
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), store?.cleanup()]);
  });

  async function subscribe(target: object, sources: object[]): Promise<string> {
    const destination = await api('POST', '/event_destinations', { target });
    expect(destination.status).toBe(201);
    const subscription = await api('POST', '/event_subscriptions', {
      sources,
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
    await service.pipeline.reload();
    return destination.body.id;
  }

  it('keeps acknowledging while ClickHouse is down, and every acknowledged event arrives after it returns', async () => {
    const destinationId = await subscribe(
      { clickhouse: { url: clickhouse.url, table_prefix: 'fault_' } },
      [{ type: 'tcp_connection_closed.v0', fields: ['conn.client_ip', 'conn.bytes_out'] }],
    );
    const client = ingestClient(service.url, TEST_INGEST_TOKEN);
    const events = generateEvents(12_000, { accounts: [account], tcpShare: 1, seed: 11 });
    const acknowledged: string[] = [];
    for (let i = 0; i < events.length; i += 400) {
      if (i === 4_000) await clickhouse.stop();
      if (i === 9_200) await clickhouse.start();
      const response = await client.publish(events.slice(i, i + 400));
      acknowledged.push(...response.eventIds);
      if (i === 4_800) {
        const health = (await api('GET', `/event_destinations/${destinationId}`)).body.health;
        expect(health.status).toBe('retrying');
        expect(health.backlog.events).toBeGreaterThan(0);
        expect(health.last_error).toEqual(expect.any(String));
      }
    }
    expect(acknowledged).toHaveLength(12_000);
    await until(async () => {
      const health = (await api('GET', `/event_destinations/${destinationId}`)).body.health;
      return health.status === 'ok' && health.backlog.events === 0;
    }, 60_000);
    const distinct = await clickhouse.query(
      'SELECT uniqExact(event_id) FROM default.fault_tcp_connection_closed_v0 FORMAT TabSeparated',
    );
    expect(Number(distinct.trim())).toBe(12_000);
    const ids = new Set(
      (
        await clickhouse.query(
          'SELECT event_id FROM default.fault_tcp_connection_closed_v0 FORMAT TabSeparated',
        )
      )
        .trim()
        .split('\n'),
    );
    expect(acknowledged.every((id) => ids.has(id))).toBe(true);
  });

  it('answers RESOURCE_EXHAUSTED when the spool is full, drops nothing, and recovers', async () => {
    const deadUrl = 'http://127.0.0.1:9'; // discard port: nothing listens, connections are refused
    const destinationId = await subscribe({ clickhouse: { url: deadUrl } }, [
      { type: 'http_request_complete.v0' },
    ]);
    const client = ingestClient(service.url, TEST_INGEST_TOKEN);
    const events = generateEvents(20_000, { accounts: [account], tcpShare: 0, seed: 12 });
    let exhausted: ConnectError | undefined;
    let acknowledged = 0;
    for (let i = 0; i < events.length && exhausted === undefined; i += 500) {
      try {
        acknowledged += (await client.publish(events.slice(i, i + 500))).accepted;
      } catch (error) {
        exhausted = ConnectError.from(error);
      }
    }
    expect(exhausted?.code).toBe(Code.ResourceExhausted);
    const health = (await api('GET', `/event_destinations/${destinationId}`)).body.health;
    expect(health.backlog.events).toBe(acknowledged);
    expect(health.backlog.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    // Point the destination at the real server: the spool drains there and ingest works again.
    const patched = await api('PATCH', `/event_destinations/${destinationId}`, {
      target: { clickhouse: { url: clickhouse.url, table_prefix: 'full_' } },
    });
    expect(patched.status).toBe(200);
    await service.pipeline.reload();
    await until(async () => {
      const h = (await api('GET', `/event_destinations/${destinationId}`)).body.health;
      return h?.status === 'ok' && h.backlog.events === 0;
    }, 60_000);
    const count = await clickhouse.query(
      'SELECT uniqExact(event_id) FROM default.full_http_request_complete_v0 FORMAT TabSeparated',
    );
    expect(Number(count.trim())).toBe(acknowledged);
    expect((await client.publish(events.slice(0, 100))).accepted).toBe(100);
  });

  it('delivers audit events to a subscription for agent_ingress_created.v0', async () => {
    await subscribe({ file: { path: 'audit' } }, [{ type: 'agent_ingress_created.v0' }]);
    const created = await api('POST', '/agent_ingresses', {
      domain: `audit-${Date.now()}.example.com`,
    });
    expect(created.status).toBe(201);
    await service.pipeline.relay.drain();
    const dir = join(store.env.DATA_DIR, 'events', account, 'audit');
    const lines = readdirSync(dir)
      .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
    expect(lines).toEqual([
      {
        event_id: expect.stringMatching(/^ev_/),
        event_type: 'agent_ingress_created.v0',
        event_timestamp: expect.stringMatching(/Z$/),
        account_id: account,
        principal: {
          id: expect.stringMatching(/^ak_/),
          uri: expect.stringContaining('/api_keys/ak_'),
        },
        object: created.body,
      },
    ]);
    const pending = await service.db.query('SELECT 1 FROM audit_outbox WHERE delivered_at IS NULL');
    expect(pending.rows).toHaveLength(0);
  });
});
