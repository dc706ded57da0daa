import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CREDENTIAL_HEADERS, REDACTED } from '../../src/data-plane/redaction/policy.ts';
import type { Event } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Service } from '../../src/service.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { type KafkaMock, readTopic, startKafka } from '../helpers/kafka.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

const TOTAL = 50_000;
const PER_REQUEST = 500;

type Http = Extract<Event['payload'], { case: 'httpRequestComplete' }>['value'];
type Tcp = Extract<Event['payload'], { case: 'tcpConnectionClosed' }>['value'];
const http = (e: Event) =>
  e.payload.case === 'httpRequestComplete' ? (e.payload.value as Http) : undefined;
const tcp = (e: Event) =>
  e.payload.case === 'tcpConnectionClosed' ? (e.payload.value as Tcp) : undefined;

/** The subscriptions under test, each with its reference predicate (plain JS) and its fields. */
const SUBSCRIPTIONS = {
  file: {
    sources: [
      {
        type: 'http_request_complete.v0',
        filter: 'conn.server_port == 443 && conn.server_name.endsWith(".example.com")',
        fields: [],
      },
      { type: 'tcp_connection_closed.v0', filter: '', fields: ['conn.bytes_in', 'conn.client_ip'] },
    ],
    reference: (e: Event) =>
      (http(e)?.conn?.serverPort === 443 && http(e)!.conn!.serverName.endsWith('.example.com')) ||
      tcp(e) !== undefined,
  },
  kafka: {
    sources: [
      {
        type: 'http_request_complete.v0',
        filter: 'ev.conn.client_ip.startsWith("10.1.")',
        fields: ['conn.server_name', 'http.response.status_code'],
      },
    ],
    reference: (e: Event) => http(e)?.conn?.clientIp.startsWith('10.1.') === true,
  },
  clickhouse: {
    sources: [
      {
        type: 'http_request_complete.v0',
        filter: 'conn.server_name.matches("^(api|shop)\\\\.")',
        fields: [],
      },
      { type: 'tcp_connection_closed.v0', filter: 'conn.server_port in [22, 5432]', fields: [] },
    ],
    reference: (e: Event) =>
      /^(api|shop)\./.test(http(e)?.conn?.serverName ?? '') ||
      [22, 5432].includes(tcp(e)?.conn?.serverPort ?? -1),
  },
};

function expectEnvelope(envelope: any, event: Event, eventId: string): void {
  expect(envelope).toMatchObject({
    event_id: eventId,
    event_type:
      event.payload.case === 'httpRequestComplete'
        ? 'http_request_complete.v0'
        : 'tcp_connection_closed.v0',
    event_timestamp: expect.stringMatching(/^2026-11-22T\d\d:\d\d:\d\d(\.\d+)?Z$/),
    account_id: event.accountId,
    principal: null,
  });
  expect(Object.keys(envelope).sort()).toEqual(
    ['account_id', 'event_id', 'event_timestamp', 'event_type', 'object', 'principal'].sort(),
  );
}

describe('data plane end to end: Connect ingest → workers → file, Kafka and ClickHouse', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let clickhouse: ClickHouseServer;
  let kafka: KafkaMock;
  const events = generateEvents(TOTAL, { accounts: ['ac_edge_one', 'ac_edge_two'], seed: 7 });
  const eventIds: string[] = [];

  beforeAll(async () => {
    [store, clickhouse, kafka] = await Promise.all([
      pgliteStore(),
      startClickHouse(),
      startKafka({ topics: ['traffic:8'] }),
    ]);
    service = await startTestService(store, {
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      BATCH_LINGER_MS: '20',
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), kafka?.close(), store?.cleanup()]);
  });

  it('delivers exactly the matching events, with exactly the selected fields, to each destination', async () => {
    // The events' account: the bootstrap key's account must own the subscriptions, so the
    // generated events use the real account id (the second account has no subscription).
    const account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    for (const event of events) if (event.accountId === 'ac_edge_one') event.accountId = account;

    const targets = {
      file: { file: { path: 'traffic' } },
      kafka: { kafka: { brokers: kafka.brokers, topic: 'traffic' } },
      clickhouse: { clickhouse: { url: clickhouse.url, database: 'default', table_prefix: 'it_' } },
    };
    for (const [name, target] of Object.entries(targets)) {
      const destination = await api('POST', '/event_destinations', {
        description: name,
        format: 'json',
        target,
      });
      expect(destination.status).toBe(201);
      const subscription = await api('POST', '/event_subscriptions', {
        description: name,
        sources: SUBSCRIPTIONS[name as keyof typeof SUBSCRIPTIONS].sources,
        destination_ids: [destination.body.id],
      });
      expect(subscription.status).toBe(201);
    }
    await service.pipeline.reload();

    const client = ingestClient(service.url, TEST_INGEST_TOKEN);
    for (let i = 0; i < TOTAL; i += PER_REQUEST) {
      const response = await client.publish(events.slice(i, i + PER_REQUEST));
      expect(response.accepted).toBe(PER_REQUEST);
      eventIds.push(...response.eventIds);
    }
    expect(new Set(eventIds).size).toBe(TOTAL);

    const expected = (name: keyof typeof SUBSCRIPTIONS) =>
      new Set(
        events.flatMap((e, i) =>
          e.accountId === account && SUBSCRIPTIONS[name].reference(e) ? [eventIds[i]] : [],
        ),
      );
    const byId = new Map(events.map((e, i) => [eventIds[i], e]));

    // File: every acknowledged line is already fsync'd.
    const dir = join(store.env.DATA_DIR, 'events', account, 'traffic');
    const lines = readdirSync(dir)
      .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
    const fileExpected = expected('file');
    expect(fileExpected.size).toBeGreaterThan(10_000);
    expect(lines).toHaveLength(fileExpected.size);
    expect(new Set(lines.map((l) => l.event_id))).toEqual(fileExpected);
    for (const line of lines) {
      const event = byId.get(line.event_id)!;
      expectEnvelope(line, event, line.event_id);
      if (event.payload.case === 'tcpConnectionClosed') {
        expect(line.object).toEqual({
          conn: {
            bytes_in: Number(tcp(event)!.conn!.bytesIn),
            client_ip: tcp(event)!.conn!.clientIp,
          },
        });
      } else {
        expect(line.object.conn.server_port).toBe(443);
        expect(Object.keys(line.object).sort()).toEqual(
          [
            'backend',
            'basic_auth',
            'circuit_breaker',
            'compression',
            'conn',
            'http',
            'ip_policy',
            'oauth',
            'tls',
            'traffic_policy',
            'webhook_verification',
          ].sort(),
        );
        // As sent, but the credential headers' values (docs/security.md#redacted).
        expect(line.object.http.request.headers).toEqual(
          Object.fromEntries(
            Object.entries(http(event)!.http!.request!.headers).map(([k, v]) => [
              k,
              CREDENTIAL_HEADERS.includes(k.toLowerCase()) ? [REDACTED] : v.values,
            ]),
          ),
        );
      }
    }

    // Kafka: keyed by host, only the two selected fields.
    const kafkaExpected = expected('kafka');
    const messages = await readTopic(kafka.brokers, 'traffic', kafkaExpected.size, 30_000);
    expect(messages).toHaveLength(kafkaExpected.size);
    const kafkaIds = new Set<string>();
    for (const message of messages) {
      const envelope = JSON.parse(message.value);
      const event = byId.get(envelope.event_id)!;
      kafkaIds.add(envelope.event_id);
      expectEnvelope(envelope, event, envelope.event_id);
      expect(envelope.object).toEqual({
        conn: { server_name: http(event)!.conn!.serverName },
        http: { response: { status_code: http(event)!.http!.response!.statusCode } },
      });
      expect(message.key).toBe(http(event)!.conn!.serverName);
    }
    expect(kafkaIds).toEqual(kafkaExpected);

    // ClickHouse: typed columns, one table per kind.
    const clickhouseExpected = expected('clickhouse');
    const rows = (
      await clickhouse.query(
        `SELECT event_id, event_type, account_id, conn_server_name, conn_server_port, toString(event_timestamp) AS ts
         FROM (SELECT event_id, event_type, account_id, conn_server_name, conn_server_port, event_timestamp FROM default.it_http_request_complete_v0
               UNION ALL
               SELECT event_id, event_type, account_id, conn_server_name, conn_server_port, event_timestamp FROM default.it_tcp_connection_closed_v0)
         FORMAT JSONEachRow`,
      )
    )
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
    expect(rows).toHaveLength(clickhouseExpected.size);
    expect(new Set(rows.map((r) => r.event_id))).toEqual(clickhouseExpected);
    for (const row of rows) {
      const event = byId.get(row.event_id)!;
      const conn = (http(event) ?? tcp(event))!.conn!;
      expect(row).toMatchObject({
        account_id: account,
        conn_server_name: conn.serverName,
        conn_server_port: conn.serverPort,
      });
    }
    const headers = await clickhouse.query(
      `SELECT http_request_headers, http_response_status_code FROM default.it_http_request_complete_v0 WHERE event_id = '${[...clickhouseExpected].find((id) => http(byId.get(id)!) !== undefined)}' FORMAT JSONEachRow`,
    );
    expect(JSON.parse(JSON.parse(headers).http_request_headers)).toBeTypeOf('object');
  });
});
