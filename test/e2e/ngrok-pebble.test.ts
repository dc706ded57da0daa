import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trafficFields } from '../../src/catalogue/index.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createCertRunner } from '../../src/control-plane/certs/runner.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePort } from '../helpers/free-port.ts';
import { NAME_SERVERS, startParentZone } from '../helpers/parent-zone.ts';
import { type Pebble, startPebble } from '../helpers/pebble.ts';
import { servedFingerprint } from '../helpers/served-certificate.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { eventually, fileEvents, startEchoServer } from './agents-helpers.ts';

// ngrok's SDK against the certificate the service really gets: pebble (Let's Encrypt's test CA)
// issues the Agent Ingress's certificate over DNS-01, validated against the service's own DNS,
// and the SDK trusts nothing but pebble's root (session_ca_cert) when it dials the ingress's
// region domain (mapped to 127.0.0.1 in /etc/hosts). Then the events of that agent, read from a
// file destination as a customer would: every field of the catalogue, with the values the SDK
// and its traffic give.

const INGRESS = 'ngrok-pebble.example.org';
const DIALLED = `us.${INGRESS}`;
const APP = `app.us.${INGRESS}`;
const DESTINATION = 'ngrok-events';
const run = promisify(execFile);

/** The catalogue's session fields (SPEC.md: agent_session_start.v0 and _stop.v0, one set). */
const SESSION_FIELDS = [
  'session.id',
  'session.uri',
  'credential.id',
  'credential.uri',
  'agent_ip',
  'ingress_server_ip',
  'region',
  'ingress_hostname',
  'user_agent',
  'metadata',
  'os',
  'arch',
  'transport',
  'started_at',
  'expires_at',
  'stopped_at',
  'deprecated.upcoming_minimum_version',
  'deprecated.upcoming_enforcement_date',
  'deprecated.message',
  'error',
];

/** The dotted names of an object's leaves (maps and lists are leaves). */
function leaves(object: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(object).flatMap(([key, value]) =>
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !isMapField(prefix + key)
      ? leaves(value as Record<string, unknown>, `${prefix}${key}.`)
      : [`${prefix}${key}`],
  );
}

/** The catalogue's map-valued fields: their keys are data, not field names. */
function isMapField(name: string): boolean {
  return name === 'http.request.headers' || name === 'http.response.headers';
}

const catalogueNames = (type: 'http_request_complete.v0' | 'tcp_connection_closed.v0') =>
  trafficFields(type)
    .map((f) => f.name)
    .sort();

describe('ngrok agents on the certificate pebble issues the ingress; their events', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let pebble: Pebble;
  let parent: Awaited<ReturnType<typeof startParentZone>>;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  let pebbleRoot: string;
  let authtoken: string;
  let credentialId: string;
  let tcpPort: number;
  let eventsDir: string;
  let unmap: () => void = () => {};
  /** The service's settings: the certificate runner reads them too. */
  let env: Record<string, string>;

  beforeAll(async () => {
    store = await pgliteStore();
    const dnsPort = await freePort();
    [pebble, parent] = await Promise.all([
      startPebble(dnsPort),
      startParentZone(new Map([[INGRESS, NAME_SERVERS]])),
    ]);
    tcpPort = await freePort();
    env = {
      ...store.env,
      DNS_PORT: String(dnsPort),
      REGIONS: 'us,eu',
      NAME_SERVERS: NAME_SERVERS.join(','),
      ACME_DIRECTORY_URL: pebble.directoryUrl,
      ACME_CA_FILE: pebble.caFile,
      DELEGATION_RESOLVER: `127.0.0.1:${parent.port}`,
      TCP_ADDR_PORTS: `${tcpPort}-${tcpPort}`,
    };
    service = await startTestService(store, env);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    echo = await startEchoServer();
    const accountId = (await api('GET', '/account')).body.id;
    eventsDir = join(accountEventsDir(store.env.DATA_DIR, accountId), DESTINATION);
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: DESTINATION } },
    });
    const subscribed = await api('POST', '/event_subscriptions', {
      sources: [
        { type: 'agent_session_start.v0' },
        { type: 'agent_session_stop.v0' },
        { type: 'http_request_complete.v0' },
        { type: 'tcp_connection_closed.v0' },
      ],
      destination_ids: [destination.body.id],
    });
    expect(subscribed.status, JSON.stringify(subscribed.body)).toBe(201);
    await service.pipeline.reload();
    const credential = (await api('POST', '/credentials', { description: 'pebble sdk' })).body;
    [authtoken, credentialId] = [credential.token, credential.id];
    unmap = mapToLoopback([DIALLED]);
  }, 60_000);
  afterAll(async () => {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    echo?.server.close();
    await service?.close();
    await parent?.close();
    await pebble?.close();
    await store?.cleanup();
  });

  /** The file destination's events of `type`, once `accept` finds what it waits for among them. */
  const eventsOfType = <T>(type: string, accept: (objects: any[]) => T | undefined) =>
    eventually(() => {
      const objects = fileEvents(eventsDir)
        .filter((event) => event.event_type === type)
        .map((event) => event.object);
      return accept(objects);
    }, `${type} in the file destination`);

  it('issues the ingress its certificate from pebble, which the edge and the agent listener serve', async () => {
    const created = await api('POST', '/agent_ingresses', {
      domain: INGRESS,
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
    });
    expect(created.status).toBe(201);
    const runner = createCertRunner({
      db: service.db,
      config: loadConfig(env),
      keyring: service.keyring,
      logger: createLogger('silent'),
    });
    expect(await runner.runOnce()).toBe(true);
    const [certificate] = (await api('GET', '/tls_certificates')).body.tls_certificates;
    expect(certificate.issuer_common_name).toMatch(/^Pebble Intermediate CA/);
    expect(certificate.subject_alternative_names.dns_names).toContain(`*.us.${INGRESS}`);
    const leaf = new X509Certificate(certificate.certificate_pem).fingerprint256;
    expect(await servedFingerprint(service.agentPort!, DIALLED)).toBe(leaf);
    pebbleRoot = await pebble.issuingRoot();
  }, 60_000);

  it('the SDK dials the region domain trusting only pebble’s root, and serves HTTP through the edge', async () => {
    const listener = await ngrok.forward({
      addr: echo.port,
      authtoken,
      server_addr: `${DIALLED}:${service.agentPort}`,
      session_ca_cert: pebbleRoot,
      force_new_session: true,
      domain: APP,
      session_metadata: 'pebble agent',
    });
    expect(listener.url()).toBe(`https://${APP}`);
    // As a browser would reach it: HTTPS on the edge, the same pebble certificate, pebble's root.
    const https = await curlHttps(service.edgeHttpsPort!, APP, '/over-tls?q=1', pebbleRoot);
    expect(https.status).toBe(200);
    expect(JSON.parse(https.body)).toMatchObject({
      method: 'GET',
      url: '/over-tls?q=1',
      host: `${APP}:${service.edgeHttpsPort}`,
    });
    const plain = await run(
      'curl',
      [
        '-sS',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '-H',
        `Host: ${APP}`,
        '-A',
        'pebble-e2e/1.0',
        `http://127.0.0.1:${service.edgePort}/plain`,
      ],
      { encoding: 'utf8' },
    );
    expect(plain.stdout).toBe('200');
    await listener.close();
  });

  it('serves a TCP endpoint on a reserved address through the SDK', async () => {
    const reserved = await api('POST', '/reserved_addrs', {});
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(201);
    const tcpEcho = createTcpServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => tcpEcho.listen(0, '127.0.0.1', resolve));
    const listener = await ngrok.forward({
      proto: 'tcp',
      remote_addr: reserved.body.addr,
      addr: (tcpEcho.address() as AddressInfo).port,
      authtoken,
      server_addr: `${DIALLED}:${service.agentPort}`,
      session_ca_cert: pebbleRoot,
      force_new_session: true,
    });
    const socket = tcpConnect(tcpPort, '127.0.0.1');
    socket.write('twelve bytes');
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    expect(chunk.toString()).toBe('twelve bytes');
    socket.end();
    await once(socket, 'close');
    await listener.close();
    tcpEcho.close();
  });

  it('writes session events with every catalogue field, filled from what the SDK said', async () => {
    const sessions = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    expect(sessions).toEqual([]);
    // Two binds (HTTP, TCP), each its own session (docs/decisions.md#ngrok-sessions), each closed.
    const [starts, stops] = await Promise.all(
      ['agent_session_start.v0', 'agent_session_stop.v0'].map((type) =>
        eventsOfType(type, (objects) => (objects.length === 2 ? objects : undefined)),
      ),
    );
    for (const object of [...starts, ...stops]) {
      expect(leaves(object).sort()).toEqual([...SESSION_FIELDS].sort());
      expect(object).toMatchObject({
        session: { uri: `${service.url}/tunnel_sessions/${object.session.id}` },
        credential: { id: credentialId, uri: `${service.url}/credentials/${credentialId}` },
        agent_ip: '127.0.0.1',
        ingress_server_ip: '127.0.0.1',
        region: 'us',
        ingress_hostname: DIALLED,
        os: 'linux',
        arch: 'x86_64',
        transport: 'muxado',
        expires_at: '',
        deprecated: { upcoming_minimum_version: '', upcoming_enforcement_date: '', message: '' },
      });
      expect(object.session.id).toMatch(/^ts_/);
      expect(object.user_agent).toMatch(/^ngrok-javascript\/1\.7\.0 ngrok-rust\/\d+\.\d+\.\d+$/);
      expect(Date.parse(object.started_at)).not.toBeNaN();
    }
    expect(starts.map((s) => s.metadata)).toEqual(['pebble agent', '']);
    expect(starts.map((s) => [s.error, s.stopped_at])).toEqual([
      ['', ''],
      ['', ''],
    ]);
    for (const stop of stops) {
      expect(stop.error).toBe('the agent closed the connection');
      expect(Date.parse(stop.stopped_at)).toBeGreaterThanOrEqual(Date.parse(stop.started_at));
    }
  });

  it('writes http_request_complete.v0 of SDK traffic with every catalogue field', async () => {
    const byPath = await eventsOfType('http_request_complete.v0', (objects) =>
      objects.length === 2
        ? Object.fromEntries(objects.map((o) => [o.http.request.url.path, o]))
        : undefined,
    );
    const [overTls, plain] = [byPath['/over-tls'], byPath['/plain']];
    for (const event of [overTls, plain]) {
      expect(leaves(event).sort()).toEqual(catalogueNames('http_request_complete.v0'));
    }
    expect(overTls).toMatchObject({
      backend: { connection_reused: false },
      conn: { client_ip: '127.0.0.1', server_ip: '127.0.0.1', server_name: APP },
      http: {
        request: {
          method: 'get',
          url: { host: APP, path: '/over-tls', query: 'q=1', scheme: 'https' },
          body_length: 0,
        },
        response: { status_code: 200 },
      },
      tls: { version: 'TLSv1.3' },
      basic_auth: { decision: 'invalid' },
      ip_policy: { decision: 'invalid' },
    });
    expect(overTls.conn.server_port).toBe(service.edgeHttpsPort);
    expect(overTls.http.request.url.raw).toBe(`https://${APP}/over-tls?q=1`);
    expect(overTls.tls.cipher_suite).toMatch(/^TLS_/);
    expect(overTls.http.response.body_length).toBeGreaterThan(0);
    // The second request took the proxy stream the first one left (keep-alive pooling).
    expect(plain).toMatchObject({
      backend: { connection_reused: true },
      conn: { server_name: APP, server_port: service.edgePort },
      http: { request: { user_agent: 'pebble-e2e/1.0', url: { scheme: 'http', path: '/plain' } } },
      tls: { version: '', cipher_suite: '' },
    });
  });

  it('writes tcp_connection_closed.v0 of SDK traffic with every catalogue field', async () => {
    const event = await eventsOfType('tcp_connection_closed.v0', (objects) =>
      objects.find((o) => o.conn.server_port === tcpPort),
    );
    expect(leaves(event).sort()).toEqual(catalogueNames('tcp_connection_closed.v0'));
    expect(event).toMatchObject({
      conn: {
        bytes_in: 12,
        bytes_out: 12,
        client_ip: '127.0.0.1',
        server_ip: '127.0.0.1',
        server_port: tcpPort,
      },
      ip_policy: { decision: 'invalid' },
      traffic_policy: { logs: [] },
    });
    expect(Date.parse(event.conn.end_ts)).toBeGreaterThanOrEqual(Date.parse(event.conn.start_ts));
  });
});

/** `curl` over HTTPS to the edge for `host`, trusting `root` only. */
async function curlHttps(port: number, host: string, path: string, root: string) {
  const dir = mkdtempSync(join(tmpdir(), 'agin-root-'));
  try {
    writeFileSync(join(dir, 'root.pem'), root);
    const { stdout } = await run(
      'curl',
      [
        '-sS',
        '-i',
        '--cacert',
        join(dir, 'root.pem'),
        '--resolve',
        `${host}:${port}:127.0.0.1`,
        `https://${host}:${port}${path}`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    const split = stdout.indexOf('\r\n\r\n');
    return { status: Number(stdout.split(' ')[1]), body: stdout.slice(split + 4) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
