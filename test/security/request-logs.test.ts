import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { type Service, startService } from '../../src/service.ts';
import { CLOSED_MID_REQUEST } from '../../src/shared/http/http-errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { until } from '../faults/support.ts';
import { freePort } from '../helpers/free-port.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { openRaw, requestHead } from '../helpers/raw-http.ts';
import { apiClient, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// What the service logs about requests, read from a logger writing into memory at trace level:
// no query string value (a token may travel in any parameter) and no error-level line for a
// client that went away mid-upload.

const PUBLISH_PATH = '/agent_ingress.ingest.v0.IngestService/Publish';
const PUBLISH_STREAM_PATH = '/agent_ingress.ingest.v0.IngestService/PublishStream';
const ERROR_LEVEL = 50;
const INFO_LEVEL = 30;

describe('request logs', () => {
  let store: TestStore;
  let service: Service;
  const lines: Record<string, any>[] = [];

  beforeAll(async () => {
    store = await pgliteStore();
    const port = String(await freePort());
    const config = loadConfig({
      PORT: port,
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'trace',
      BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      // Random agent and edge ports: suites run side by side.
      SSH_PORT: '0',
      AGENT_PORT: '0',
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      ...store.env,
    });
    const capture = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    service = await startService(config, createLogger(config.logLevel, capture));
  });
  beforeEach(() => {
    lines.length = 0;
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('logs every request URL without its query values', async () => {
    const secret = () => `sk_${randomBytes(12).toString('hex')}`;
    const secrets = Array.from({ length: 6 }, secret);
    const api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const stranger = apiClient(service.url);
    const answers = [
      await api('GET', `/agent_ingresses?token=${secrets[0]}`),
      await api('GET', `/agent_ingresses?limit=5&api_key=${secrets[1]}`),
      await stranger('GET', `/api_keys?access_token=${secrets[2]}`),
      await api('GET', `/no/such/route?${secrets[3]}`),
      await api('GET', `/%E0%A4%A?token=${secrets[4]}`),
      await api('POST', `/api_keys?token=${secrets[5]}`, '{"description": '),
    ];
    expect(answers.map((a) => a.status)).toEqual([400, 400, 401, 404, 404, 400]);
    const text = JSON.stringify(lines);
    for (const value of secrets) expect(text).not.toContain(value);
    // The requests are logged, with their paths and parameter names.
    const urls = lines.filter((line) => line.req?.url).map((line) => line.req.url);
    expect(urls).toContain('/agent_ingresses?token=[redacted]');
    expect(urls).toContain('/agent_ingresses?limit=[redacted]&api_key=[redacted]');
    expect(urls).toContain('/no/such/route?[redacted]');
  });

  it.each([
    {
      what: 'a REST body',
      path: '/api_keys',
      token: TEST_BOOTSTRAP_KEY,
      type: 'application/json',
      saysWhy: true,
    },
    {
      what: 'a Publish body',
      path: PUBLISH_PATH,
      token: TEST_INGEST_TOKEN,
      type: 'application/proto',
      saysWhy: true,
    },
    {
      // connect-es reads this one and logs nothing of the abort.
      what: 'a PublishStream body',
      path: PUBLISH_STREAM_PATH,
      token: TEST_INGEST_TOKEN,
      type: 'application/connect+proto',
      saysWhy: false,
    },
  ])(
    'logs $what the client abandons mid-upload below error level',
    async ({ path, token, type, saysWhy }) => {
      for (const end of ['reset', 'close'] as const) {
        lines.length = 0;
        const conn = await openRaw(service.url);
        conn.send(
          requestHead('POST', path, {
            authorization: `Bearer ${token}`,
            'content-type': type,
            'content-length': 10_000,
          }),
        );
        conn.send('{"descr');
        // The request reached its handler (it is logged) before the client goes away.
        await until(
          'the request to arrive',
          () => lines.some((l) => l.req?.url === path),
          5000,
          10,
        );
        if (end === 'reset') conn.socket.resetAndDestroy();
        else conn.socket.end();
        // Where the service says why, wait for its line; then, as before, 300 ms for any error
        // line the abort would bring.
        if (saysWhy) {
          await until(
            'the line saying why',
            () => lines.some((l) => l.msg === CLOSED_MID_REQUEST),
            5000,
            10,
          );
        }
        await sleep(300);
        const errors = lines.filter((line) => line.level >= ERROR_LEVEL);
        expect(errors, `${end}: ${JSON.stringify(errors)}`).toEqual([]);
        const why = lines.find((line) => line.msg === CLOSED_MID_REQUEST);
        if (saysWhy) expect(why?.level, end).toBe(INFO_LEVEL);
        conn.destroy();
      }
      expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    },
  );
});
