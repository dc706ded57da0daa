import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { promisify } from 'node:util';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePort } from '../helpers/free-port.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import {
  type ApiClient,
  apiClient,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { postgresStore, type TestStore } from '../helpers/stores.ts';
import { curl, eventually, fileEvents, type SshAgent, startSshAgent } from './agents-helpers.ts';
import { echoWebSocket, webSocketVia } from './websocket-echo.ts';

// Two instances on one PostgreSQL store, the agents connected to A, every client through B:
// a cloud endpoint's forward-internal reaches an internal endpoint held by A (A runs the chain
// and writes the one event), and a TLS endpoint's connection reaches A's agent unterminated
// (its own certificate answers), both through the relay between instances.

const INGRESS = 'relay-endpoints-e2e.example.net';
const DIALLED = `us.${INGRESS}`;
const FRONT = `front.${INGRESS}`;
const TLS_NAME = `tls.${DIALLED}`;

const FRONT_POLICY = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/api')"]
    actions:
      - type: forward-internal
        config: {url: "http://api.internal"}
  - expressions: ["req.url.path.startsWith('/theirs')"]
    actions:
      - type: forward-internal
        config: {url: "http://theirs.internal"}
  - actions:
      - type: forward-internal
        config: {url: "http://gone.internal", on_error: continue}
      - type: custom-response
        config: {status_code: 503, body: "down for maintenance"}
`;

/** A local service that says who it is and what it received. */
async function localService(who: string): Promise<Server> {
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ who, url: request.url, headers: request.headers, body }));
    });
  });
  server.on('upgrade', (request, socket) =>
    echoWebSocket(request, socket, { sent: 0, received: 0 }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

const portOf = (server: { address(): unknown }) => (server.address() as AddressInfo).port;

describe('internal and TLS endpoints of an agent on another instance (PostgreSQL)', () => {
  let store: TestStore;
  let a: Service;
  let b: Service;
  let unmap: () => void = () => {};
  const pki = new OpensslPki();
  const dirs: string[] = [];
  const servers: (Server | TlsServer)[] = [];
  let ca: Issued;
  let accountId: string;
  let authtoken: string;
  let theirToken: string;
  let other: ApiClient;
  const agents: SshAgent[] = [];

  /** Each instance's DATA_DIR and INTERNAL_URL. */
  const settingsOf = new Map<Service, { dir: string; internalUrl: string }>();

  async function instance(): Promise<Service> {
    const dir = mkdtempSync(join(tmpdir(), 'agin-relay-ep-'));
    dirs.push(dir);
    const internalUrl = `http://127.0.0.1:${await freePort()}`;
    const service = await startTestService(store, {
      DATA_DIR: dir,
      REGIONS: 'us',
      INTERNAL_URL: internalUrl,
    });
    settingsOf.set(service, { dir, internalUrl });
    return service;
  }

  /** An SDK agent connected to A. */
  const forwardOnA = (options: Record<string, unknown>) =>
    ngrok.forward({
      authtoken,
      server_addr: `${DIALLED}:${a.agentPort}`,
      session_ca_cert: ca.cert,
      force_new_session: true,
      ...options,
    });

  /** The account's events an instance's file destination wrote. */
  const eventsAt = (service: Service) => () =>
    fileEvents(join(accountEventsDir(settingsOf.get(service)!.dir, accountId), 'relayed')).map(
      (event) => event.object,
    );

  beforeAll(async () => {
    store = await postgresStore();
    a = await instance();
    b = await instance();
    const api = apiClient(a.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    ca = pki.selfSigned('ca', { subject: '/CN=relay endpoints CA', extensions: CA_EXTENSIONS });
    const names = [INGRESS, DIALLED, `*.${DIALLED}`, `*.${INGRESS}`];
    await giveIngressCertificate(a, pki, ca, { accountId, domain: INGRESS, names });
    authtoken = (await api('POST', '/credentials', {})).body.token;
    other = await otherAccountClient(a);
    theirToken = (await other('POST', '/credentials', {})).body.token;
    unmap = mapToLoopback([DIALLED]);
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'relayed' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [{ type: 'http_request_complete.v0' }, { type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    await Promise.all([a.pipeline.reload(), b.pipeline.reload()]);
    const created = await api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${FRONT}`,
      traffic_policy: FRONT_POLICY,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    await Promise.all(agents.map((agent) => agent.kill()));
    for (const server of servers) server.close();
    await b?.close();
    await a?.close();
    await store?.cleanup();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    pki.close();
  });

  it("forwards B's request to the internal endpoint on A, one event, the account's own only", async () => {
    const ours = await localService('ours');
    const theirs = await localService('theirs');
    servers.push(ours, theirs);
    await forwardOnA({
      addr: portOf(ours),
      domain: 'api.internal',
      traffic_policy: `on_http_request:\n  - actions: [{type: add-headers, config: {headers: {x-internal: "\${endpoint.host}"}}}]\n`,
    });
    // Another account binds the same internal name and one of its own, on A too (ssh -R).
    for (const hostname of ['api.internal', 'theirs.internal']) {
      const agent = startSshAgent(a, { user: theirToken, hostname, localPort: portOf(theirs) });
      agents.push(agent);
      await eventually(async () => {
        if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
        const list = (await other('GET', '/tunnel_sessions')).body.tunnel_sessions;
        return list.find((s: { metadata: string }) => s.metadata === hostname);
      }, `the other account's ${hostname}`);
    }
    const answer = await curl(b.edgePort!, FRONT, '/api/hello?x=1', ['-d', 'the body']);
    expect(answer.status, answer.body).toBe(200);
    const seen = JSON.parse(answer.body);
    expect(seen).toMatchObject({ who: 'ours', url: '/api/hello?x=1', body: 'the body' });
    expect(seen.headers).toMatchObject({ host: FRONT, 'x-internal': 'api.internal' });
    // A WebSocket takes the same road.
    const socket = await webSocketVia(`ws://${FRONT}:${b.edgePort}/api/chat`);
    await once(socket, 'open');
    const echoed = once(socket, 'message');
    socket.send('hello, internal');
    const [message] = (await echoed) as [MessageEvent];
    expect(message.data).toBe('hello, internal');
    socket.close();
    // Another account's internal endpoint is offline to this account's cloud endpoint.
    const refused = await curl(b.edgePort!, FRONT, '/theirs');
    expect(refused.status).toBe(404);
    expect(refused.body).toContain('ERR_NGROK_3200');
    // on_error: continue goes on when the name is online nowhere.
    const fallback = await curl(b.edgePort!, FRONT, '/fallback');
    expect(fallback).toMatchObject({ status: 503, body: 'down for maintenance' });

    // A, which served it, wrote its one event; B wrote none for it.
    const onA = eventsAt(a);
    const [event] = await eventually(() => {
      const found = onA().filter((e) => e.http?.request.url.path === '/api/hello');
      return found.length > 0 ? found : undefined;
    }, 'the event on A');
    expect(event.http.response.status_code).toBe(200);
    expect(event.http.request.url.host).toBe(FRONT);
    // B answered /theirs itself, after /api/hello: its events up to then are written.
    await eventually(
      () => eventsAt(b)().find((e) => e.http?.request.url.path === '/theirs'),
      "B's /theirs event",
    );
    const all = [...onA(), ...eventsAt(b)()];
    expect(all.filter((e) => e.http?.request.url.path === '/api/hello')).toHaveLength(1);
  });

  it("passes a TLS endpoint's connection through B to the agent on A, unterminated", async () => {
    const own = pki.issue('agent-own', ca, {
      key: 'ecdsa',
      subject: '/CN=the agent own certificate',
      extensions: ['basicConstraints=critical,CA:FALSE', `subjectAltName=DNS:${TLS_NAME}`],
    });
    const local: TlsServer = createTlsServer({ cert: own.cert, key: own.key }, (socket) =>
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nfrom the tls'),
    );
    servers.push(local);
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    const listener = await forwardOnA({ proto: 'tls', domain: TLS_NAME, addr: portOf(local) });
    expect(listener.url()).toBe(`tls://${TLS_NAME}`);
    const port = b.edgeHttpsPort!;
    const caFile = join(dirs[0], 'test-ca.pem');
    writeFileSync(caFile, ca.cert);
    const served = await promisify(execFile)(
      'curl',
      [
        '-sS',
        '--resolve',
        `${TLS_NAME}:${port}:127.0.0.1`,
        '--cacert',
        caFile,
        `https://${TLS_NAME}:${port}/`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(served.stdout).toBe('from the tls');
    const subject = await promisify(execFile)(
      'sh',
      [
        '-c',
        `openssl s_client -connect 127.0.0.1:${port} -servername ${TLS_NAME} </dev/null 2>/dev/null | openssl x509 -noout -subject`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(subject.stdout).toContain('the agent own certificate');
    // A reports the connection with the client and the port B saw.
    const closed = await eventually(
      () => eventsAt(a)().find((e) => e.conn?.server_name === TLS_NAME),
      'the tcp_connection_closed.v0 on A',
    );
    expect(closed.conn).toMatchObject({ client_ip: '127.0.0.1', server_port: port });
    expect(closed.conn.bytes_out).toBeGreaterThan(0);
    // The relay takes a raw stream only when an instance signed it.
    const internalPort = new URL(settingsOf.get(a)!.internalUrl).port;
    const unsigned = await promisify(execFile)(
      'curl',
      [
        '-sS',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '-H',
        'Connection: Upgrade',
        '-H',
        'Upgrade: agent-ingress-tls',
        `http://127.0.0.1:${internalPort}/relay/tls`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(unsigned.stdout).toBe('403');
  });
});
