import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, toBinary } from '@bufbuild/protobuf';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { eventPool, route, until, waitRouted } from '../faults/support.ts';
import { generateEvents } from '../helpers/events.ts';
import { expectRawError } from '../helpers/expect-error.ts';
import { freePort } from '../helpers/free-port.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { openRaw, type RawConnection, requestHead } from '../helpers/raw-http.ts';
import {
  PROCESS_BOOTSTRAP_KEY,
  type ServiceProcess,
  startServiceProcess,
} from '../helpers/service-process.ts';

// Clients that are slow on purpose, over raw sockets against the service as a process: bodies
// and headers trickled a byte at a time, connections held idle or never used, more connections
// than the service takes, and all of these at SIGTERM.

const PUBLISH_PATH = '/agent_ingress.ingest.v0.IngestService/Publish';
const REQUEST_TIMEOUT_MS = 2000;
const HEADERS_TIMEOUT_MS = 1000;
const MAX_CONNECTIONS = 6;
// Timeouts are checked periodically, and the machine is shared: how late a cut may come.
const SLACK_MS = 1500;
const ERROR_LEVEL = 50;

/** A POST whose head says `length` bytes of body follow. */
function postHead(path: string, token: string, type: string, length: number): string {
  return requestHead('POST', path, {
    authorization: `Bearer ${token}`,
    'content-type': type,
    'content-length': length,
  });
}

const TRICKLED = [
  {
    what: 'a REST body',
    path: '/agent_ingresses',
    token: PROCESS_BOOTSTRAP_KEY,
    type: 'application/json',
  },
  {
    what: 'a Publish body',
    path: PUBLISH_PATH,
    token: TEST_INGEST_TOKEN,
    type: 'application/proto',
  },
];

describe('slow clients and the connection cap', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-slow-'));
  let service: ServiceProcess;
  let grpcUrl: string;
  const open: RawConnection[] = [];

  /** True when `count` new connections at once each get 200 for GET /healthz; closes them. */
  async function served(count: number): Promise<boolean> {
    const fresh = await Promise.all(Array.from({ length: count }, connection));
    for (const conn of fresh) conn.send(requestHead('GET', '/healthz'));
    const answers = await Promise.all(fresh.map((conn) => conn.response()));
    for (const conn of fresh) conn.destroy();
    return answers.every((answer) => answer.status === 200);
  }
  async function connection(): Promise<RawConnection> {
    const conn = await openRaw(service.url);
    open.push(conn);
    return conn;
  }

  beforeAll(async () => {
    const grpcPort = await freePort();
    grpcUrl = `http://127.0.0.1:${grpcPort}`;
    service = await startServiceProcess({
      dataDir,
      env: {
        GRPC_PORT: String(grpcPort),
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      },
    });
  });
  afterEach(() => {
    for (const conn of open.splice(0)) conn.destroy();
  });
  afterAll(async () => {
    if (service?.running()) await service.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 503 ERR_TOO_MANY_CONNECTIONS beyond MAX_CONNECTIONS and serves again once some close', async () => {
    const held: RawConnection[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      const conn = await connection();
      conn.send(requestHead('GET', '/healthz'));
      expect((await conn.response()).status).toBe(200);
      held.push(conn);
    }
    const extra = await connection();
    extra.send(requestHead('GET', '/healthz'));
    const refused = await extra.response();
    expectRawError(refused, 503, 'ERR_TOO_MANY_CONNECTIONS');
    expect(refused.headers.connection).toBe('close');
    await extra.closed;
    // The held connections still work.
    held[0].send(requestHead('GET', '/healthz'));
    expect((await held[0].response(1)).status).toBe(200);

    held[1].destroy();
    await until('a new connection once one closed', () => served(1), 5000, 100);
    for (const conn of held) conn.destroy();
    // Once the service has seen them close, its whole capacity serves again.
    await until('MAX_CONNECTIONS new connections served', () => served(MAX_CONNECTIONS), 5000, 100);
  });

  it('closes connections beyond MAX_CONNECTIONS on GRPC_PORT, and serves gRPC again once some close', async () => {
    const sessions = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      const session = connectHttp2(grpcUrl);
      await once(session, 'remoteSettings');
      sessions.push(session);
    }
    const started = Date.now();
    const extra = connectHttp2(grpcUrl);
    extra.on('error', () => {}); // the reset is the expected end
    await new Promise((resolve) => extra.once('close', resolve));
    expect(Date.now() - started).toBeLessThan(SLACK_MS);
    for (const session of sessions) session.destroy();
    const events = generateEvents(2, { accounts: [service.accountId!] });
    const accepted = await until(
      'a gRPC Publish once sessions closed',
      async () => (await ingestClient(grpcUrl, TEST_INGEST_TOKEN, 'grpc').publish(events)).accepted,
      5000,
      100,
    );
    expect(accepted).toBe(2);
  });

  it.each(TRICKLED)(
    'cuts $what trickled a byte at a time at REQUEST_TIMEOUT_MS with 408 ERR_REQUEST_TIMEOUT',
    async ({ path, token, type }) => {
      const conn = await connection();
      const started = Date.now();
      conn.send(postHead(path, token, type, 1000));
      void conn.trickle('x'.repeat(1000), 50);
      const closedAt = await conn.closed;
      expect(closedAt - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(closedAt - started).toBeLessThan(REQUEST_TIMEOUT_MS + SLACK_MS);
      const [answer, ...more] = conn.responses();
      expectRawError(answer, 408, 'ERR_REQUEST_TIMEOUT');
      expect(answer.headers.connection).toBe('close');
      expect(more).toEqual([]);
      // Cut for being slow is not the service's failure.
      expect(service.logs().filter((line) => line.level >= ERROR_LEVEL)).toEqual([]);
    },
  );

  it('cuts headers trickled a byte at a time at HEADERS_TIMEOUT_MS with 408 ERR_REQUEST_TIMEOUT', async () => {
    const conn = await connection();
    const started = Date.now();
    conn.send('GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-slow: ');
    void conn.trickle('a'.repeat(1000), 50);
    const closedAt = await conn.closed;
    expect(closedAt - started).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
    expectRawError(conn.responses()[0], 408, 'ERR_REQUEST_TIMEOUT');
  });

  it.each([
    { what: 'a REST request', path: '/agent_ingresses', type: 'application/json' },
    { what: 'a Publish', path: PUBLISH_PATH, type: 'application/proto' },
  ])(
    'closes the connection after a 401 to $what instead of reading the rest of its body',
    async ({ path, type }) => {
      const conn = await connection();
      const started = Date.now();
      conn.send(postHead(path, 'not-a-valid-token-0123456789', type, 100_000));
      void conn.trickle('x'.repeat(1000), 20);
      const answer = await conn.response();
      expect(answer.status).toBe(401);
      expect(answer.headers.connection).toBe('close');
      // Well before REQUEST_TIMEOUT_MS would have cut it.
      expect((await conn.closed) - started).toBeLessThan(REQUEST_TIMEOUT_MS / 2);
    },
  );
});

describe('SIGTERM with slow clients', () => {
  const dataDirs: string[] = [];
  let service: ServiceProcess | undefined;
  const open: RawConnection[] = [];

  async function start(env: Record<string, string> = {}): Promise<ServiceProcess> {
    const dataDir = mkdtempSync(join(tmpdir(), 'agin-slow-term-'));
    dataDirs.push(dataDir);
    // Long enough that a connection the shutdown waits for shows as a late or failed exit.
    service = await startServiceProcess({
      dataDir,
      env: { SHUTDOWN_TIMEOUT_MS: '20000', LOG_LEVEL: 'info', ...env },
    });
    return service;
  }
  async function connection(url: string): Promise<RawConnection> {
    const conn = await openRaw(url);
    open.push(conn);
    return conn;
  }

  afterEach(async () => {
    for (const conn of open.splice(0)) conn.destroy();
    if (service?.running()) await service.stop('SIGKILL');
  });
  afterAll(() => {
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  });

  it('exits 0 at once with idle keep-alive connections and connections that sent nothing', async () => {
    const { url } = await start();
    for (let i = 0; i < 50; i++) {
      const conn = await connection(url);
      conn.send(requestHead('GET', '/healthz'));
      expect((await conn.response()).status).toBe(200);
    }
    for (let i = 0; i < 10; i++) await connection(url);
    const exit = await service!.stop('SIGTERM');
    expect(exit.code).toBe(0);
    expect(exit.ms).toBeLessThan(5000);
  });

  it('exits 0 at once with clients trickling headers and bodies', async () => {
    const { url } = await start();
    for (const { path, token, type } of TRICKLED) {
      const conn = await connection(url);
      conn.send(postHead(path, token, type, 1000));
      void conn.trickle('x'.repeat(1000), 100);
    }
    const slowHead = await connection(url);
    slowHead.send('GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-slow: ');
    void slowHead.trickle('a'.repeat(1000), 100);
    await sleep(500);
    const exit = await service!.stop('SIGTERM');
    expect(exit.code).toBe(0);
    expect(exit.ms).toBeLessThan(5000);
  });

  it('finishes a request in flight past REQUEST_TIMEOUT_MS and answers one sent during the drain with 503 ERR_UNAVAILABLE', async () => {
    // Publish answers once its batch is written: a long linger keeps it in flight.
    const linger = 3000;
    const { url, api, accountId } = await start({
      BATCH_LINGER_MS: String(linger),
      REQUEST_TIMEOUT_MS: '1000',
      HEADERS_TIMEOUT_MS: '1000',
    });
    const [fileId] = await route(
      api,
      [{ file: { path: 'drain' } }],
      [{ type: 'tcp_connection_closed.v0' }],
    );
    await waitRouted(url, api, accountId!, [fileId]);
    const body = toBinary(
      PublishRequestSchema,
      create(PublishRequestSchema, { events: eventPool(accountId!, 3, 7) }),
    );
    const conn = await connection(url);
    const started = Date.now();
    conn.send(
      Buffer.concat([
        Buffer.from(postHead(PUBLISH_PATH, TEST_INGEST_TOKEN, 'application/proto', body.length)),
        body,
      ]),
    );
    await sleep(300);
    service!.child.kill('SIGTERM');
    await until(
      'the shutdown to begin',
      () => service!.logs().some((line) => line.msg === 'shutting down'),
      5000,
      20,
    );
    // Pipelined behind the publish, on the same connection, after the drain began.
    conn.send(requestHead('GET', '/healthz'));
    const published = await conn.response(0);
    expect(published.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThan(1000);
    const refused = await conn.response(1);
    expectRawError(refused, 503, 'ERR_UNAVAILABLE');
    expect(refused.headers.connection).toBe('close');
    const exit = await service!.stop('SIGTERM');
    expect(exit.code).toBe(0);
  });
});
