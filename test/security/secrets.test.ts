import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { loadPipelineConfig } from '../../src/data-plane/store/pipeline-config.ts';
import { type Service, startService } from '../../src/service.ts';
import { AppError } from '../../src/shared/errors.ts';
import { createLogger, type Logger } from '../../src/shared/logger.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { generateEvents } from '../helpers/events.ts';
import { freePort } from '../helpers/free-port.ts';
import { ingestClient } from '../helpers/ingest-client.ts';
import { type KafkaMock, startKafka } from '../helpers/kafka.ts';
import { type ApiResponse, apiClient, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// A service whose every log line (at trace) is captured; it is driven through the paths where
// secrets pass (key creation, destinations with passwords that really are used against Kafka and
// ClickHouse and fail, ingest, bad tokens), then no secret may be found in any log line, any
// response, the audit outbox, the api_keys table, or any file under DATA_DIR, the embedded
// store's files (tables and WAL) included.

const unique = (label: string) => `${label}-${randomBytes(9).toString('base64url')}`;

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Every file under `dir`, skipping `skip` (directory names). */
function filesUnder(dir: string, skip: string[]): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return skip.includes(name) ? [] : filesUnder(path, skip);
    return [path];
  });
}

describe.each(STORES)('secrets stay secret on $kind', ({ open }) => {
  const INGEST_TOKEN = unique('ingest-token');
  const KAFKA_PASSWORD = unique('kafka-sasl-pw');
  const KAFKA_PASSWORD_2 = unique('kafka-sasl-pw2');
  const CLICKHOUSE_PASSWORD = unique('ch-pw');
  const DEAD_CLICKHOUSE_PASSWORD = unique('ch-dead-pw');
  const PARAM_SECRET = unique('param-secret');
  /** Every secret string; tokens of created keys and wrong tokens are added as they appear. */
  const secrets = new Set([
    TEST_BOOTSTRAP_KEY,
    INGEST_TOKEN,
    KAFKA_PASSWORD,
    KAFKA_PASSWORD_2,
    CLICKHOUSE_PASSWORD,
    DEAD_CLICKHOUSE_PASSWORD,
    PARAM_SECRET,
    // What an HTTP client would put on the wire for ClickHouse (Basic auth).
    Buffer.from(`tester:${CLICKHOUSE_PASSWORD}`).toString('base64'),
    Buffer.from(`writer:${DEAD_CLICKHOUSE_PASSWORD}`).toString('base64'),
  ]);
  const logLines: string[] = [];
  /** Every response body and header block seen, except the one showing a new key's token. */
  const responses: { what: string; text: string }[] = [];
  const keyTokens: string[] = [];

  let store: TestStore;
  let service: Service;
  let logger: Logger;
  let clickhouse: ClickHouseServer;
  let kafka: KafkaMock;
  let accountId: string;
  const destinationIds: Record<string, string> = {};

  /** An API client that records what it was answered. */
  function recorded(token?: string) {
    const call = apiClient(service.url, token);
    return async (
      method: string,
      path: string,
      body?: unknown,
      headers?: Record<string, string>,
    ) => {
      const response = await call(method, path, body, headers);
      record(`${method} ${path}`, response);
      return response;
    };
  }
  function record(what: string, response: ApiResponse): void {
    const headers = JSON.stringify([...response.headers.entries()]);
    responses.push({ what, text: `${JSON.stringify(response.body)} ${headers}` });
  }

  beforeAll(async () => {
    [store, clickhouse, kafka] = await Promise.all([
      open(),
      startClickHouse(),
      startKafka({ topics: ['events'] }),
    ]);
    const port = String(await freePort());
    const config = loadConfig({
      PORT: port,
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'trace',
      BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
      INGEST_TOKENS: INGEST_TOKEN,
      BATCH_LINGER_MS: '5',
      // Random agent and edge ports: suites run side by side.
      SSH_PORT: '0',
      AGENT_PORT: '0',
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      ...store.env,
    });
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    logger = createLogger(config.logLevel, capture);
    service = await startService(config, logger);
    accountId = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), kafka?.close(), store?.cleanup()]);
  });

  it('creates keys and destinations whose secrets are used but never shown', async () => {
    const api = recorded(TEST_BOOTSTRAP_KEY);
    const raw = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    for (const description of ['ci', 'deploy']) {
      const created = await raw('POST', '/api_keys', { description });
      expect(created.status).toBe(201);
      keyTokens.push(created.body.token);
      secrets.add(created.body.token);
      // The create answer shows its own token once, and nothing else secret.
      const { token: _token, ...rest } = created.body;
      responses.push({ what: 'POST /api_keys (token removed)', text: JSON.stringify(rest) });
    }
    for (const token of keyTokens)
      expect((await recorded(token)('GET', '/api_keys')).status).toBe(200);

    const targets = {
      kafka: {
        kafka: {
          brokers: kafka.brokers,
          topic: 'events',
          sasl: { mechanism: 'plain', username: 'ingress', password: KAFKA_PASSWORD },
        },
      },
      clickhouse: {
        clickhouse: { url: clickhouse.url, user: 'tester', password: CLICKHOUSE_PASSWORD },
      },
      deadClickhouse: {
        clickhouse: {
          url: 'http://127.0.0.1:9',
          user: 'writer',
          password: DEAD_CLICKHOUSE_PASSWORD,
        },
      },
      file: { file: { path: 'secrets' } },
    };
    for (const [name, target] of Object.entries(targets)) {
      const created = await api('POST', '/event_destinations', { description: name, target });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      destinationIds[name] = created.body.id;
    }
    const patched = await api('PATCH', `/event_destinations/${destinationIds.kafka}`, {
      target: {
        kafka: {
          brokers: kafka.brokers,
          topic: 'events',
          sasl: { mechanism: 'plain', username: 'ingress', password: KAFKA_PASSWORD_2 },
        },
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.target.kafka.sasl).toEqual({
      mechanism: 'plain',
      username: 'ingress',
      password_set: true,
    });
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [
        { type: 'http_request_complete.v0' },
        { type: 'tcp_connection_closed.v0' },
        { type: 'api_key_created.v0' },
        { type: 'event_destination_updated.v0' },
      ],
      destination_ids: Object.values(destinationIds),
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    // Stored encrypted (SECRETS_KEY): the raw column holds none; the pipeline opens them to use.
    const stored = await service.db.query('SELECT target::text AS text FROM event_destinations');
    const storedText = JSON.stringify(stored.rows);
    const opened = JSON.stringify(
      (await loadPipelineConfig(service.db, service.keyring)).destinations,
    );
    for (const secret of [KAFKA_PASSWORD_2, CLICKHOUSE_PASSWORD, DEAD_CLICKHOUSE_PASSWORD]) {
      expect(storedText).not.toContain(secret);
      expect(opened).toContain(secret);
    }
  });

  it('uses them: publishes with the ingest token, sends test events, fails against ClickHouse', async () => {
    const api = recorded(TEST_BOOTSTRAP_KEY);
    await service.pipeline.reload();
    const ingest = ingestClient(service.url, INGEST_TOKEN);
    const published = await ingest.publish(generateEvents(50, { accounts: [accountId] }));
    expect(published.accepted).toBe(50);
    await service.pipeline.relay.drain();
    for (const id of Object.values(destinationIds)) {
      const tested = await api('POST', `/event_destinations/${id}/test`);
      expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    }
    // Every destination has used its credentials: the wrong ClickHouse password was refused.
    const health = (name: string) => service.pipeline.destinationHealth(destinationIds[name]);
    await until(() => health('clickhouse')?.last_error != null, 20_000);
    await until(() => health('deadClickhouse')?.last_error != null, 20_000);
    await until(
      () => health('kafka')?.last_error != null || health('kafka')?.last_success_at != null,
      20_000,
    );
    expect(health('clickhouse')?.last_error).toMatch(/password|authenticat/i);
    for (const id of Object.values(destinationIds)) await api('GET', `/event_destinations/${id}`);
    await api('GET', '/event_destinations');
    await api('GET', '/event_subscriptions');
  });

  it('answers wrong tokens with 401 / UNAUTHENTICATED and never echoes them', async () => {
    const wrong = [
      `${keyTokens[0]}x`,
      `aik_${randomBytes(32).toString('base64url')}`,
      `${INGEST_TOKEN}x`,
      INGEST_TOKEN, // an ingest token is not an API key
    ];
    for (const token of wrong) {
      secrets.add(token);
      const response = await recorded(token)('GET', '/event_destinations');
      expect(response.status).toBe(401);
    }
    const basic = `Basic ${Buffer.from(`admin:${KAFKA_PASSWORD}`).toString('base64')}`;
    secrets.add(basic.slice('Basic '.length));
    expect((await recorded()('GET', '/api_keys', undefined, { authorization: basic })).status).toBe(
      401,
    );
    for (const token of [`${INGEST_TOKEN}x`, keyTokens[1], TEST_BOOTSTRAP_KEY]) {
      const error = await ingestClient(service.url, token)
        .publish(generateEvents(1, { accounts: [accountId] }))
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(error?.code).toBe(Code.Unauthenticated);
      responses.push({ what: 'ingest error', text: `${error?.rawMessage} ${error?.metadata}` });
    }
  });

  it('does not echo a malformed body, which may hold a secret, into the log or the answer', async () => {
    const secret = unique('Zmalformed');
    secrets.add(secret.slice(0, 8));
    // An unquoted value: V8's own message would quote the body around the bad token.
    const body = `{"target": {"clickhouse": {"url": "http://127.0.0.1:8123", "password": ${secret}}}}`;
    const response = await recorded(TEST_BOOTSTRAP_KEY)('POST', '/event_destinations', body);
    expect(response.body.error_code).toBe('ERR_MALFORMED_JSON');
  });

  it('redacts secrets in objects and store errors when they are logged', async () => {
    // A PGlite error carries the failed query's parameters; a pg error its detail.
    const storeError = await service.db
      .query('SELECT $1::text AS s, 1 / 0 AS boom', [PARAM_SECRET])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(storeError).toBeDefined();
    logger.error({ err: storeError }, 'store error');
    logger.error({ err: new AppError('ERR_INTERNAL', 'x', {}, { cause: storeError }) }, 'wrapped');
    const target = {
      kafka: { sasl: { password: PARAM_SECRET } },
      clickhouse: { password: PARAM_SECRET },
    };
    logger.info({ target }, 'a target');
    logger.info({ destination: { target } }, 'a destination');
    logger.info({ config: { password: PARAM_SECRET, sasl: { password: PARAM_SECRET } } }, 'config');
    logger.info({ password: PARAM_SECRET, token: PARAM_SECRET }, 'top level');
    logger.info({ req: { headers: { authorization: `Bearer ${PARAM_SECRET}` } } }, 'headers');
    expect(logLines.join('\n')).not.toContain(PARAM_SECRET);
    expect(logLines.join('\n')).toContain('[redacted]');
  });

  it('finds no secret in logs, responses, the audit outbox, api_keys or data files', async () => {
    await service.pipeline.relay.drain();
    await service.close(); // flushes destinations and spools: their log lines are in too
    const logText = logLines.join('\n');
    expect(logLines.length).toBeGreaterThan(50);
    expect(logText).toContain('"level":20'); // debug lines (the sinks' clients) were captured
    const outbox = JSON.stringify((await readOutbox()).rows);
    const apiKeys = await readApiKeys();
    const files = filesUnder(store.env.DATA_DIR, []).map((path) => ({
      path,
      text: readFileSync(path).toString('latin1'),
    }));
    expect(files.length).toBeGreaterThan(0);
    expect(responses.length).toBeGreaterThan(20);
    const leaks: string[] = [];
    for (const secret of secrets) {
      if (logText.includes(secret)) leaks.push(`log: ${secret}`);
      for (const { what, text } of responses)
        if (text.includes(secret)) leaks.push(`${what}: ${secret}`);
      if (outbox.includes(secret)) leaks.push(`audit_outbox: ${secret}`);
      if (JSON.stringify(apiKeys).includes(secret)) leaks.push(`api_keys: ${secret}`);
      for (const { path, text } of files)
        if (text.includes(secret)) leaks.push(`${path}: ${secret}`);
    }
    expect(leaks).toEqual([]);

    // api_keys holds the SHA-256 of each token, and no column holds a token.
    const hashes = apiKeys.map((row) => Buffer.from(row.token_hash as Uint8Array).toString('hex'));
    for (const token of [TEST_BOOTSTRAP_KEY, ...keyTokens]) {
      expect(hashes).toContain(createHash('sha256').update(token).digest('hex'));
    }
    for (const row of apiKeys) expect(Object.keys(row)).not.toContain('token');
  });

  // service.close() closed the store: read it through a fresh connection to the same data.
  async function readOutbox() {
    return queryAfterClose('SELECT * FROM audit_outbox');
  }
  async function readApiKeys(): Promise<Record<string, unknown>[]> {
    return (await queryAfterClose('SELECT * FROM api_keys')).rows;
  }
  async function queryAfterClose(sql: string) {
    const { openStore } = await import('../../src/store/index.ts');
    const db = await openStore(loadConfig({ ...store.env }));
    try {
      return await db.query<Record<string, unknown>>(sql);
    } finally {
      await db.close();
    }
  }
});
