import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Service } from '../../src/service.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// int64 fields beyond 2^53 must reach the delivered JSON with their exact digits: a double
// would turn 9007199254740993 into …992.

const BIG = 9007199254740993n; // 2^53 + 1: the first integer a double cannot hold
const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);

/** The delivered NDJSON lines (raw text) of the file destination under `dir`. */
function deliveredLines(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
    .filter((line) => line !== '');
}

describe('int64 values in delivered events', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let clickhouse: ClickHouseServer;
  let account: string;

  /** Subscribes the account's traffic to a new destination of `target`. */
  async function subscribe(target: unknown, tcpFields: string[]): Promise<void> {
    const destination = await api('POST', '/event_destinations', { format: 'json', target });
    expect(destination.status).toBe(201);
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [
        { type: 'http_request_complete.v0', filter: '', fields: [] },
        { type: 'tcp_connection_closed.v0', filter: '', fields: tcpFields },
      ],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
  }

  beforeAll(async () => {
    [store, clickhouse] = await Promise.all([pgliteStore(), startClickHouse()]);
    service = await startTestService(store, {
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      BATCH_LINGER_MS: '5',
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    account = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    await subscribe({ file: { path: 'exact' } }, ['conn.bytes_in', 'conn.bytes_out']);
    await subscribe(
      { clickhouse: { url: clickhouse.url, database: 'default', table_prefix: 'x_' } },
      [],
    );
    await service.pipeline.reload();
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), store?.cleanup()]);
  });

  it.each(['connect', 'connect-json'] as const)(
    'carry their exact digits over %s, whole events and projected ones',
    async (protocol) => {
      const http = create(EventSchema, {
        accountId: account,
        eventId: `ev-http-${protocol}`,
        payload: {
          case: 'httpRequestComplete',
          value: {
            compression: { algorithm: 'gzip', bytesSaved: MIN },
            http: { request: { bodyLength: BIG }, response: { bodyLength: MAX } },
          },
        },
      });
      const tcp = create(EventSchema, {
        accountId: account,
        eventId: `ev-tcp-${protocol}`,
        payload: {
          case: 'tcpConnectionClosed',
          value: { conn: { bytesIn: -BIG, bytesOut: 2n ** 53n - 1n } },
        },
      });
      const response = await ingestClient(service.url, TEST_INGEST_TOKEN, protocol).publish([
        http,
        tcp,
      ]);
      expect(response.accepted).toBe(2);

      const lines = deliveredLines(join(store.env.DATA_DIR, 'events', account, 'exact'));
      const line = (id: string) => lines.find((l) => l.includes(`"event_id":"${id}"`));
      const httpLine = line(`ev-http-${protocol}`);
      expect(httpLine).toContain(
        '"compression":{"algorithm":"gzip","bytes_saved":-9223372036854775808}',
      );
      expect(httpLine).toContain('"request":{"body_length":9007199254740993,');
      expect(httpLine).toContain('"response":{"body_length":9223372036854775807,');
      expect(line(`ev-tcp-${protocol}`)).toContain(
        '"object":{"conn":{"bytes_in":-9007199254740993,"bytes_out":9007199254740991}}',
      );

      const row = async (table: string, columns: string, id: string) =>
        (
          await clickhouse.query(
            `SELECT ${columns} FROM default.x_${table} WHERE event_id = '${id}' FORMAT TabSeparated`,
          )
        ).trim();
      expect(
        await row(
          'http_request_complete_v0',
          'compression_bytes_saved, http_request_body_length, http_response_body_length',
          `ev-http-${protocol}`,
        ),
      ).toBe('-9223372036854775808\t9007199254740993\t9223372036854775807');
      expect(
        await row(
          'tcp_connection_closed_v0',
          'conn_bytes_in, conn_bytes_out',
          `ev-tcp-${protocol}`,
        ),
      ).toBe('-9007199254740993\t9007199254740991');
    },
  );
});
