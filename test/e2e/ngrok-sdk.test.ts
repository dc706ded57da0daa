import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePort } from '../helpers/free-port.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import { openRaw, type RawConnection, requestHead } from '../helpers/raw-http.ts';
import {
  type ApiClient,
  apiClient,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { startEchoServer } from './agents-helpers.ts';
import { eventsOf, trafficEvents } from './edge-helpers.ts';
import { echoWebSocket, webSocketVia } from './websocket-echo.ts';

// ngrok's own SDK (@ngrok/ngrok 1.7, its Rust core) as the agent: it dials an Agent Ingress's
// region domain on AGENT_PORT (mapped to 127.0.0.1 in /etc/hosts: the SDK resolves the name
// itself), trusts the ingress's certificate through session_ca_cert, authenticates with a tunnel
// credential's authtoken and binds endpoints the edge then serves. The ingress's certificate is
// stored as the certificate runner stores what ACME issued (acme-pebble.test.ts covers issuing).

const INGRESS = 'ngrok-e2e.example.net';
const DIALLED = `us.${INGRESS}`;
const APP = `app.us.${INGRESS}`;
/** MAX_CHANNELS_PER_SESSION: a few, so that streams held for good show as a 503. */
const CHANNELS = 4;

/** `curl` through the edge's HTTP listener for `host`. */
async function curlEdge(port: number, host: string, path = '/') {
  const { stdout } = await promisify(execFile)(
    'curl',
    ['-sS', '-i', '-H', `Host: ${host}`, `http://127.0.0.1:${port}${path}`],
    { encoding: 'utf8', timeout: 20_000 },
  );
  const split = stdout.indexOf('\r\n\r\n');
  return { status: Number(stdout.split(' ')[1]), body: stdout.slice(split + 4) };
}

/** The object of the session event `type` about session `id`. */
async function sessionEventOf(service: Service, id: string, type: string) {
  const rows = await service.db.query<{ envelope: any }>(
    `SELECT envelope FROM audit_outbox WHERE event_type = $1
       AND envelope->'object'->'session'->>'id' = $2`,
    [type, id],
  );
  return rows.rows[0]?.envelope.object;
}

describe('ngrok agents through the agent ingress (the real @ngrok/ngrok SDK)', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  let unmap: () => void = () => {};
  const pki = new OpensslPki();
  let ca: Issued;
  let authtoken: string;
  let credentialId: string;
  let tcpPort: number;
  let env: Record<string, string>;
  const tally = { sent: 0, received: 0 };

  const sessionEvent = (id: string, type: string) => sessionEventOf(service, id, type);
  const serverAddr = () => `${DIALLED}:${service.agentPort}`;
  const forward = (options: Record<string, unknown>) =>
    ngrok.forward({
      addr: echo.port,
      authtoken,
      server_addr: serverAddr(),
      session_ca_cert: ca.cert,
      force_new_session: true,
      ...options,
    });

  beforeAll(async () => {
    store = await pgliteStore();
    tcpPort = await freePort();
    env = {
      REGIONS: 'us,eu',
      TCP_ADDR_PORTS: `${tcpPort}-${tcpPort}`,
      AGENT_PORT: String(await freePort()),
      EDGE_HTTP_PORT: String(await freePort()),
      MAX_CHANNELS_PER_SESSION: String(CHANNELS),
    };
    service = await startTestService(store, env);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const accountId = (await api('GET', '/account')).body.id;
    echo = await startEchoServer();
    echo.server.on('upgrade', (request, socket) => echoWebSocket(request, socket, tally));
    ca = pki.selfSigned('ca', { subject: '/CN=ngrok e2e CA', extensions: CA_EXTENSIONS });
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const names = [
      INGRESS,
      ...['us', 'eu'].flatMap((r) => [`${r}.${INGRESS}`, `*.${r}.${INGRESS}`]),
    ];
    await giveIngressCertificate(service, pki, ca, { accountId, domain: INGRESS, names });
    const credential = await api('POST', '/credentials', { description: 'ngrok sdk' });
    expect(credential.status).toBe(201);
    authtoken = credential.body.token;
    credentialId = credential.body.id;
    unmap = mapToLoopback([DIALLED, `eu.${INGRESS}`]);
  });
  afterAll(async () => {
    // kill() waits for a reconnect in its backoff: bounded.
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    echo?.server.close();
    await service?.close();
    await store?.cleanup();
    pki.close();
  });

  it('presents the ingress certificate for its region domain, and fails a name of nobody', async () => {
    const served = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect(
        { host: '127.0.0.1', port: service.agentPort!, servername: DIALLED, ca: ca.cert },
        () => {
          resolve(new X509Certificate(socket.getPeerX509Certificate()!.raw).subject);
          socket.end();
        },
      );
      socket.on('error', reject);
    });
    expect(served).toContain(INGRESS);
    await expect(
      new Promise((resolve, reject) => {
        const socket = tlsConnect(
          {
            host: '127.0.0.1',
            port: service.agentPort!,
            servername: 'nobody.example.org',
            ca: ca.cert,
          },
          () => resolve(socket.end()),
        );
        socket.on('error', reject);
      }),
    ).rejects.toThrow(/handshake failure|alert/);
  });

  it('serves an HTTP endpoint under the ingress through the edge; the session shows what the SDK runs on', async () => {
    const listener = await forward({
      domain: APP,
      metadata: 'tunnel meta',
      session_metadata: 'agent meta',
    });
    expect(listener.url()).toBe(`https://${APP}`);
    const answer = await curlEdge(service.edgePort!, APP, '/hello?x=1');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ method: 'GET', url: '/hello?x=1', host: APP });
    const sessions = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    const session = sessions.find((s: any) => s.transport === 'ngrok');
    expect(session).toMatchObject({
      agent_version: '1.7.0',
      os: 'linux',
      ip: '127.0.0.1',
      metadata: 'agent meta',
      region: 'us',
      transport: 'ngrok',
      credential: { id: credentialId },
    });
    const start = await sessionEvent(session.id, 'agent_session_start.v0');
    expect(start).toMatchObject({
      os: 'linux',
      arch: 'x86_64',
      transport: 'muxado',
      ingress_hostname: DIALLED,
      user_agent: expect.stringContaining('ngrok-rust'),
      error: '',
    });
    await listener.close();
  });

  it("refuses a wrong authtoken with ngrok's error, which the SDK shows", async () => {
    const refused = await forward({ domain: APP, authtoken: 'not-a-token' }).then(
      () => undefined,
      (error: Error & { errorCode?: string }) => error,
    );
    expect(refused?.message).toMatch(/The authtoken you specified is not valid/);
    expect(refused?.errorCode).toBe('ERR_NGROK_107');
  });

  it("refuses another account's authtoken at this ingress", async () => {
    const other = await otherAccountClient(service);
    const token = (await other('POST', '/credentials', {})).body.token;
    const refused = await forward({ domain: APP, authtoken: token }).then(
      () => undefined,
      (error: Error & { errorCode?: string }) => error,
    );
    expect(refused?.message).toMatch(
      new RegExp(`not permitted to use the agent ingress via "${DIALLED.replaceAll('.', '\\.')}"`),
    );
    expect(refused?.errorCode).toBe('ERR_NGROK_127');
  });

  it('refuses a name the account does not hold, and endpoint options it does not apply', async () => {
    const notOurs = await forward({ domain: 'app.elsewhere.example.org' }).then(
      () => undefined,
      (error: Error & { errorCode?: string }) => error,
    );
    expect(notOurs?.message).toMatch(/not a domain of this account/);
    expect(notOurs?.errorCode).toBe('ERR_NGROK_319');
    const withProxyProto = await forward({ domain: APP, proxy_proto: '2' }).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(withProxyProto?.message).toMatch(/does not apply the endpoint option ProxyProto/);
  });

  it('closes the SDK listener when the session is stopped through the API', async () => {
    // What the SDK logs of its listeners: its forwarding task ends when its tunnel is closed.
    const logged: string[] = [];
    ngrok.loggingCallback((_level, target, message) => {
      if (target === 'ngrok_javascript::listener') logged.push(message);
    }, 'DEBUG');
    const listener = await forward({ domain: `stop.us.${INGRESS}` });
    // The SDK's log callback runs on the event loop after the line is written, not in order.
    await expect
      .poll(() => logged, { timeout: 10_000 })
      .toContain(`Listener "${listener.id()}" forwarding to "tcp://localhost:${echo.port}"`);
    const sessions = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    const session = sessions.find((s: any) => s.transport === 'ngrok');
    expect((await api('POST', `/tunnel_sessions/${session.id}/stop`)).status).toBe(204);
    await expect.poll(() => logged, { timeout: 10_000 }).toContain('forward returning');
    expect(await sessionEvent(session.id, 'agent_session_stop.v0')).toMatchObject({
      error: 'stopped through the API (POST /tunnel_sessions/{id}/stop)',
    });
    expect((await curlEdge(service.edgePort!, `stop.us.${INGRESS}`)).status).toBe(502);
  });

  it('carries a WebSocket through the edge to the SDK and back', async () => {
    const listener = await forward({ domain: `ws.us.${INGRESS}` });
    const socket = await webSocketVia(`ws://ws.us.${INGRESS}:${service.edgePort}/chat`);
    await once(socket, 'open');
    const echoed = once(socket, 'message');
    socket.send('hello through muxado');
    const [message] = (await echoed) as [MessageEvent];
    expect(message.data).toBe('hello through muxado');
    socket.close();
    await listener.close();
  });

  it('serves a TCP endpoint on a reserved address', async () => {
    const reserved = await api('POST', '/reserved_addrs', {});
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(201);
    const tcpEcho = createTcpServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => tcpEcho.listen(0, '127.0.0.1', resolve));
    const listener = await forward({
      proto: 'tcp',
      remote_addr: reserved.body.addr,
      addr: (tcpEcho.address() as AddressInfo).port,
    });
    expect(listener.url()).toBe(`tcp://${reserved.body.addr}`);
    const socket = tcpConnect(tcpPort, '127.0.0.1');
    socket.write('bytes both ways');
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    expect(chunk.toString()).toBe('bytes both ways');
    socket.destroy();
    await listener.close();
    tcpEcho.close();
  });

  it('pools proxy streams: consecutive requests reuse one (backend.connection_reused)', async () => {
    const events = await trafficEvents({ api, service, store } as never, 'ngrok-traffic');
    const listener = await forward({ domain: `pool.us.${INGRESS}` });
    for (const path of ['/first', '/second']) {
      expect((await curlEdge(service.edgePort!, `pool.us.${INGRESS}`, path)).status).toBe(200);
    }
    const [first] = await eventsOf(events, '/first');
    const [second] = await eventsOf(events, '/second');
    expect(first.backend.connection_reused).toBe(false);
    expect(second.backend.connection_reused).toBe(true);
    expect(second.http.request.url.host).toBe(`pool.us.${INGRESS}`);
    await listener.close();
  });

  it('ends the streams of uploads whose clients left after the agent answered them', async () => {
    // The agent's server answers before the body came, and never reads it.
    const early = createHttpServer((_request, response) => response.end('early'));
    await new Promise<void>((resolve) => early.listen(0, '127.0.0.1', resolve));
    const host = `upload.us.${INGRESS}`;
    const listener = await forward({ domain: host, addr: (early.address() as AddressInfo).port });
    const clients: RawConnection[] = [];
    for (let i = 0; i < CHANNELS; i++) {
      const client = await openRaw(`http://127.0.0.1:${service.edgePort}`);
      client.send(requestHead('POST', `/upload/${i}`, { host, 'content-length': 100_000 }));
      client.send('x'.repeat(1000));
      clients.push(client);
    }
    const answers = await Promise.all(clients.map((client) => client.response(0, 10_000)));
    expect(answers.map((answer) => answer.body)).toEqual(Array(CHANNELS).fill('early'));
    for (const client of clients) client.destroy();
    // Their streams are free again, well before the agent's server would close its side (the
    // SDK keeps that connection after the edge's RST; Node's keep-alive ends it after 5 s).
    await expect
      .poll(async () => (await curlEdge(service.edgePort!, host)).status, { timeout: 2_000 })
      .toBe(200);
    await listener.close();
    early.close();
  });

  it("ends the credential's tunnels at the SDK when the credential is deleted", async () => {
    const credential = (await api('POST', '/credentials', { description: 'short-lived' })).body;
    const logged: string[] = [];
    ngrok.loggingCallback((_level, target, message) => {
      if (target === 'ngrok_javascript::listener') logged.push(message);
    }, 'DEBUG');
    const host = `gone.us.${INGRESS}`;
    await forward({ domain: host, authtoken: credential.token });
    expect((await curlEdge(service.edgePort!, host)).status).toBe(200);
    expect((await api('DELETE', `/credentials/${credential.id}`)).status).toBe(204);
    await expect.poll(() => logged, { timeout: 10_000 }).toContain('forward returning');
    await expect
      .poll(async () => (await curlEdge(service.edgePort!, host)).status, { timeout: 10_000 })
      .toBe(502);
  });

  it("dials the service's own connect name, trusting the CA made in DATA_DIR", async () => {
    const connect = 'connect.agent-ingress.example';
    const unmapConnect = mapToLoopback([connect]);
    try {
      const caPem = readFileSync(join(store.env.DATA_DIR!, 'agent-tls', 'ca.pem'), 'utf8');
      const listener = await forward({
        domain: `own.us.${INGRESS}`,
        server_addr: `${connect}:${service.agentPort}`,
        session_ca_cert: caPem,
      });
      expect((await curlEdge(service.edgePort!, `own.us.${INGRESS}`)).status).toBe(200);
      await listener.close();
    } finally {
      unmapConnect();
    }
  });
});
