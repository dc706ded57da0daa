import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { timestampMs } from '@bufbuild/protobuf/wkt';
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

/** The SQL blocks of the "Analyst queries" section of docs/clickhouse.md, in order. */
function readmeQueries(): string[] {
  const readme = readFileSync(
    join(import.meta.dirname, '..', '..', 'docs', 'clickhouse.md'),
    'utf8',
  );
  const section = readme.split('### Analyst queries')[1].split('\n## ')[0];
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1].trim());
}

describe("docs/clickhouse.md's analyst queries against ClickHouse filled by the pipeline", () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let clickhouse: ClickHouseServer;

  beforeAll(async () => {
    [store, clickhouse] = await Promise.all([pgliteStore(), startClickHouse()]);
    service = await startTestService(store, {
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      BATCH_LINGER_MS: '5',
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), store?.cleanup()]);
  });

  it('runs each of the five queries as written and gets meaningful rows', async () => {
    const account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    const destination = await api('POST', '/event_destinations', {
      target: { clickhouse: { url: clickhouse.url, database: 'agent_ingress' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [
        'http_request_complete.v0',
        'tcp_connection_closed.v0',
        'agent_ingress_created.v0',
        'agent_ingress_updated.v0',
      ].map((type) => ({ type })),
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const events = generateEvents(3000, {
      accounts: [account],
      seed: 21,
      startMs: Date.now() - 2 * 3_600_000,
    });
    await ingestClient(service.url, TEST_INGEST_TOKEN).publish(events);
    const ingress = await api('POST', '/agent_ingresses', {
      domain: `analyst-${Date.now()}.example.com`,
    });
    await api('PATCH', `/agent_ingresses/${ingress.body.id}`, { description: 'renamed' });
    await service.pipeline.relay.drain();

    const queries = readmeQueries();
    expect(queries).toHaveLength(5);
    const run = async (sql: string) =>
      (
        await clickhouse.query(
          `${sql.replaceAll('<ACCOUNT_ID>', account).replaceAll('<OBJECT_ID>', ingress.body.id)}\nFORMAT JSONEachRow`,
        )
      )
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line));
    const [topHosts, errorRate, p95, tcpBytes, audit] = await Promise.all(queries.map(run));

    const http = events.filter((e) => e.payload.case === 'httpRequestComplete');
    expect(topHosts.length).toBeGreaterThan(1);
    expect(topHosts.reduce((n, r) => n + Number(r.requests), 0)).toBe(http.length);
    // One row per minute the hour of events touches: 60 or 61, as the hour falls on the clock.
    const minutes = new Set(http.map((e) => Math.floor(timestampMs(e.eventTimestamp!) / 60_000)));
    expect(errorRate.length).toBe(minutes.size);
    expect(errorRate.every((r) => r.error_rate >= 0 && r.error_rate <= 1)).toBe(true);
    expect(p95.length).toBeGreaterThan(1);
    expect(p95.every((r) => r.p95_bytes > 0)).toBe(true);
    expect(tcpBytes.length).toBeGreaterThan(1);
    expect(audit.map((r) => r.event_type)).toEqual([
      'agent_ingress_created.v0',
      'agent_ingress_updated.v0',
    ]);
    expect(JSON.parse(audit[1].object).description).toBe('renamed');
  });
});
