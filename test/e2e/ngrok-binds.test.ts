import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { promisify } from 'node:util';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePortRange } from '../helpers/free-port.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import {
  type ApiClient,
  apiClient,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { eventually, fileEvents, startEchoServer } from './agents-helpers.ts';

// ngrok's SDK (@ngrok/ngrok, its Rust core) binding what ngrok-sdk.test.ts does not: TCP
// endpoints without an address (a port of TCP_ADDR_PORTS held for the session), TLS endpoints
// (passed through by SNI: the local server's own certificate answers) and an agent listener
// name only an uploaded certificate covers. The names the SDK dials are mapped to
// 127.0.0.1 in /etc/hosts (the SDK resolves them itself); curl reaches the endpoints.

const INGRESS = 'ngrok-binds.example.net';
const DIALLED = `us.${INGRESS}`;
/** A name of no ingress and no reserved domain: only an uploaded certificate covers it. */
const UPLOADED_NAME = 'agents.uploaded-name.test';
const SERVICE_DOMAIN = 'agent-ingress.example';

/** curl of `url` (which names 127.0.0.1 or is --resolve'd): status and body. */
async function curl(url: string, args: string[] = []) {
  const { stdout } = await promisify(execFile)('curl', ['-sS', '-i', ...args, url], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  return {
    status: Number(stdout.split(' ')[1]),
    body: stdout.slice(stdout.indexOf('\r\n\r\n') + 4),
  };
}

/** The SDK's refusal of `attempt`, or undefined when it succeeded. */
function refusalOf(attempt: Promise<unknown>) {
  return attempt.then(
    () => undefined,
    (error: Error & { errorCode?: string }) => error,
  );
}

describe('ngrok agents: TCP without an address, TLS endpoints, and names of uploaded certificates', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  let unmap: () => void = () => {};
  const pki = new OpensslPki();
  let ca: Issued;
  let authtoken: string;
  /** TCP_ADDR_PORTS: eight ports (six of them reserved while the pool is spent). */
  let ports: number[];

  const forward = (options: Record<string, unknown>) =>
    ngrok.forward({
      addr: echo.port,
      authtoken,
      server_addr: `${DIALLED}:${service.agentPort}`,
      session_ca_cert: ca.cert,
      force_new_session: true,
      ...options,
    });

  beforeAll(async () => {
    store = await pgliteStore();
    ports = await freePortRange(8);
    service = await startTestService(store, {
      REGIONS: 'us,eu',
      SERVICE_DOMAIN,
      TCP_ADDR_PORTS: `${ports[0]}-${ports[7]}`,
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const accountId = (await api('GET', '/account')).body.id;
    echo = await startEchoServer();
    ca = pki.selfSigned('ca', { subject: '/CN=ngrok binds CA', extensions: CA_EXTENSIONS });
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const names = [INGRESS, DIALLED, `*.${DIALLED}`];
    await giveIngressCertificate(service, pki, ca, { accountId, domain: INGRESS, names });
    authtoken = (await api('POST', '/credentials', { description: 'binds' })).body.token;
    unmap = mapToLoopback([DIALLED, UPLOADED_NAME]);
  });
  afterAll(async () => {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    echo?.server.close();
    await service?.close();
    await store?.cleanup();
    pki.close();
  });

  it('gives a TCP endpoint without an address a free port of TCP_ADDR_PORTS for its session', async () => {
    const reserved = [];
    for (let i = 0; i < 6; i++) {
      const address = await api('POST', '/reserved_addrs', {});
      expect(address.status).toBe(201);
      reserved.push(address.body);
    }
    const reservedPorts = reserved.map((address) => Number(address.addr.split(':')[1]));
    const first = await forward({ proto: 'tcp' });
    const second = await forward({ proto: 'tcp' });
    const portOf = (url: string) => {
      const match = /^tcp:\/\/us\.tcp\.agent-ingress\.example:(\d+)$/.exec(url);
      expect(match, url).not.toBeNull();
      return Number(match![1]);
    };
    const given = [portOf(first.url()!), portOf(second.url()!)];
    expect(given.sort()).toEqual(ports.filter((p) => !reservedPorts.includes(p)).sort());
    // Through the edge's TCP listener to the SDK, and on to the local HTTP server.
    const served = await curl(`http://127.0.0.1:${given[0]}/through-tcp`);
    expect(served.status).toBe(200);
    expect(served.body).toContain('/through-tcp');
    const sessions = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    expect(sessions.filter((s: any) => s.transport === 'ngrok')).toHaveLength(2);

    // The pool is spent: the reserved ports are their owner's, the others are held.
    const spent = await refusalOf(forward({ proto: 'tcp' }));
    expect(spent?.message).toMatch(
      new RegExp(`no TCP address is free in region us: every port of ${ports[0]}-${ports[7]}`),
    );
    // A session's end frees its port for the next.
    const freed = portOf(first.url()!);
    await first.close();
    const third = await forward({ proto: 'tcp' });
    expect(portOf(third.url()!)).toBe(freed);
    await Promise.all([second.close(), third.close()]);
    for (const address of reserved) await api('DELETE', `/reserved_addrs/${address.id}`);
  });

  it("gives a reconnecting agent its TCP tunnel's port back (the connection cut by the kernel)", async () => {
    const listener = await forward({ proto: 'tcp' });
    const url = listener.url()!;
    const port = Number(url.split(':').at(-1));
    expect((await curl(`http://127.0.0.1:${port}/before`)).status).toBe(200);
    const sessionsBefore = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    // ss -K aborts the SDK's connection to AGENT_PORT, as a network cut would.
    await promisify(execFile)('ss', ['-K', 'dport', '=', `:${service.agentPort}`]);
    await expect
      .poll(
        async () => {
          const ids = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions.map(
            (s: any) => s.id,
          );
          return ids.length === 1 && ids[0] !== sessionsBefore[0].id;
        },
        { timeout: 15_000 },
      )
      .toBe(true);
    expect((await curl(`http://127.0.0.1:${port}/after`)).status).toBe(200);
    await listener.close();
  });

  it("passes a TLS endpoint's connections through unterminated: the agent's certificate answers", async () => {
    const name = `tls.${DIALLED}`;
    const accountId = (await api('GET', '/account')).body.id;
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'tls' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    // The local server terminates TLS itself, with a certificate the edge has never seen.
    const own = pki.issue('agent-own', ca, {
      key: 'ecdsa',
      subject: '/CN=the agent own certificate',
      extensions: ['basicConstraints=critical,CA:FALSE', `subjectAltName=DNS:${name}`],
    });
    const local: TlsServer = createTlsServer({ cert: own.cert, key: own.key }, (socket) =>
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nfrom the tls'),
    );
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    const listener = await forward({
      proto: 'tls',
      domain: name,
      addr: (local.address() as { port: number }).port,
    });
    expect(listener.url()).toBe(`tls://${name}`);
    const port = service.edgeHttpsPort!;
    const caFile = join(store.env.DATA_DIR, 'test-ca.pem');
    writeFileSync(caFile, ca.cert);
    const resolve = ['--resolve', `${name}:${port}:127.0.0.1`, '--cacert', caFile];
    const served = await curl(`https://${name}:${port}/`, resolve);
    expect(served.status).toBe(200);
    expect(served.body).toBe('from the tls');
    const { stdout } = await promisify(execFile)(
      'sh',
      [
        '-c',
        `openssl s_client -connect 127.0.0.1:${port} -servername ${name} </dev/null 2>/dev/null | openssl x509 -noout -subject`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(stdout).toContain('the agent own certificate');
    // Plain HTTP for the name finds no HTTP endpoint.
    const plain = await curl(`http://127.0.0.1:${service.edgePort}/`, ['-H', `Host: ${name}`]);
    expect(plain.status).toBe(502);

    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'tls');
    const closed = await eventually(() => {
      const found = fileEvents(dir);
      return found.length >= 2 ? found : undefined;
    }, 'the tcp_connection_closed.v0 events');
    expect(closed[0].object.conn).toMatchObject({ server_name: name, server_port: port });
    expect(closed[0].object.conn.bytes_out).toBeGreaterThan(0);
    await listener.close();
    local.close();
    // Termination at the edge with the agent's certificate is not offered: refused by name.
    const terminated = await refusalOf(
      forward({ proto: 'tls', domain: name, addr: 1, crt: own.cert, key: own.key }),
    );
    expect(terminated?.message).toMatch(/does not apply the endpoint option TLSTermination/);
  });

  it("presents an uploaded certificate for a name only it covers, to that certificate's account", async () => {
    const leaf = pki.issue('uploaded', ca, {
      key: 'ecdsa',
      subject: '/CN=uploaded name',
      extensions: [
        'basicConstraints=critical,CA:FALSE',
        'extendedKeyUsage=serverAuth',
        `subjectAltName=DNS:*.uploaded-name.test`,
      ],
    });
    const other = await otherAccountClient(service);
    const uploaded = await api('POST', '/tls_certificates', {
      certificate_pem: leaf.cert,
      private_key_pem: leaf.key,
    });
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(201);
    // openssl sees the uploaded leaf for that name on AGENT_PORT.
    const { stdout } = await promisify(execFile)(
      'sh',
      [
        '-c',
        `openssl s_client -connect 127.0.0.1:${service.agentPort} -servername ${UPLOADED_NAME} </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(stdout).toContain('DNS:*.uploaded-name.test');

    const serverAddr = `${UPLOADED_NAME}:${service.agentPort}`;
    const listener = await forward({ server_addr: serverAddr, domain: `named.${DIALLED}` });
    expect(listener.url()).toBe(`https://named.${DIALLED}`);
    const served = await curl(`http://127.0.0.1:${service.edgePort}/via-uploaded`, [
      '-H',
      `Host: named.${DIALLED}`,
    ]);
    expect(served.status).toBe(200);
    // The session's start event names the dialled name as its ingress.
    const started = await service.db.query<{ envelope: any }>(
      `SELECT envelope FROM audit_outbox WHERE event_type = 'agent_session_start.v0'
         AND envelope->'object'->>'ingress_hostname' = $1`,
      [UPLOADED_NAME],
    );
    expect(started.rows.map((row) => row.envelope.object.error)).toEqual(['']);
    await listener.close();

    // The name is the uploading account's: another account's agent is refused there.
    const token = (await other('POST', '/credentials', {})).body.token;
    const refused = await refusalOf(forward({ server_addr: serverAddr, authtoken: token }));
    expect(refused?.errorCode).toBe('ERR_NGROK_127');
  });
});
