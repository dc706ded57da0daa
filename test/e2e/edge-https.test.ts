import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeIssuedCertificate } from '../../src/control-plane/certs/store-certificate.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import { servedFingerprint } from '../helpers/served-certificate.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import {
  eventually,
  fileEvents,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from './agents-helpers.ts';

// The edge's HTTPS listener: real `ssh -R` agents, certificates made by real openssl, real curl.
// The certificate presented is chosen by the TLS server name (SNI).

const HOST = 'app.sni-e2e.example.com';
const INGRESS = 'ingress.sni-e2e.example.net';

function fingerprintOf(issued: Issued): string {
  return new X509Certificate(issued.cert).fingerprint256;
}

/** `curl https://<host>:<port><path>` resolved to 127.0.0.1, trusting only `caFile`. */
async function curlHttps(
  port: number,
  host: string,
  path: string,
  caFile: string,
  extra: string[] = [],
) {
  const { stdout } = await promisify(execFile)(
    'curl',
    [
      '-sS',
      '-D',
      '-',
      '--resolve',
      `${host}:${port}:127.0.0.1`,
      '--cacert',
      caFile,
      ...extra,
      `https://${host}:${port}${path}`,
    ],
    { encoding: 'utf8', timeout: 20_000 },
  );
  const split = stdout.indexOf('\r\n\r\n');
  const headers = stdout.slice(0, split);
  return { status: Number(headers.split(' ')[1]), headers, body: stdout.slice(split + 4) };
}

describe('the edge over HTTPS, certificates chosen by SNI', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let accountId: string;
  let echo: { server: Server; port: number };
  let agent: SshAgent | undefined;
  const pki = new OpensslPki();
  let ca: Issued;
  let caFile: string;
  let domainId: string;
  let first: Issued;

  /** A server certificate the test CA signs for `names`. */
  function serverCertificate(name: string, names: string[]): Issued {
    return pki.issue(name, ca, {
      key: 'ecdsa',
      subject: `/CN=${names[0]}`,
      extensions: [
        'basicConstraints=critical,CA:FALSE',
        'extendedKeyUsage=serverAuth',
        `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
      ],
    });
  }

  async function upload(issued: Issued): Promise<string> {
    const created = await api('POST', '/tls_certificates', {
      certificate_pem: issued.cert,
      private_key_pem: issued.key,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.id;
  }

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, { REGIONS: 'us,eu' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    echo = await startEchoServer();
    ca = pki.selfSigned('ca', { subject: '/CN=SNI Test CA', extensions: CA_EXTENSIONS });
    caFile = join(pki.dir, 'ca.pem');
    writeFileSync(caFile, ca.cert);
    first = serverCertificate('first', [HOST]);
    const certificateId = await upload(first);
    const domain = await api('POST', '/reserved_domains', {
      domain: HOST,
      certificate_id: certificateId,
    });
    expect(domain.status, JSON.stringify(domain.body)).toBe(201);
    domainId = domain.body.id;
  });
  afterAll(async () => {
    await agent?.kill();
    echo?.server.close();
    await service?.close();
    await store?.cleanup();
    pki.close();
  });

  it('listens on EDGE_HTTPS_PORT beside the HTTP edge', () => {
    expect(service.edgeHttpsPort).toBeGreaterThan(0);
    expect(service.edgeHttpsPort).not.toBe(service.edgePort);
  });

  it('serves a reserved domain with its uploaded certificate; curl reaches the agent; the event has tls.*', async () => {
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'tls' } },
    });
    expect(destination.status).toBe(201);
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [{ type: 'http_request_complete.v0', filter: `conn.server_name == "${HOST}"` }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    await service.pipeline.reload();

    const token = (await api('POST', '/credentials', { acl: [] })).body.token;
    agent = startSshAgent(service, { user: token, hostname: HOST, localPort: echo.port });
    await eventually(async () => {
      if (agent!.child.exitCode !== null) throw new Error(`ssh exited: ${agent!.output()}`);
      const list = await api('GET', '/tunnel_sessions');
      return list.body.tunnel_sessions.find((s: { metadata: string }) => s.metadata === HOST);
    }, `a session for ${HOST}`);

    const port = service.edgeHttpsPort!;
    const got = await curlHttps(port, HOST, '/secure?x=1', caFile);
    expect(got.status).toBe(200);
    expect(JSON.parse(got.body)).toMatchObject({
      method: 'GET',
      url: '/secure?x=1',
      host: `${HOST}:${port}`,
    });
    expect(await servedFingerprint(port, HOST)).toBe(fingerprintOf(first));
    // The certificate is for the server name: a Host it does not name is the wrong connection.
    const misdirected = await curlHttps(port, HOST, '/', caFile, ['-H', 'Host: other.example.com']);
    expect(misdirected.status).toBe(421);

    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'tls');
    const [event] = await eventually(() => {
      const found = fileEvents(dir);
      return found.length >= 1 ? found : undefined;
    }, 'the HTTPS request event');
    expect(event.object.conn.server_name).toBe(HOST);
    expect(event.object.http.request.url).toMatchObject({
      scheme: 'https',
      path: '/secure',
      raw: `https://${HOST}/secure?x=1`,
    });
    expect(event.object.tls.version).toMatch(/^TLSv1\.[23]$/);
    expect(event.object.tls.cipher_suite).toMatch(/^TLS_/);
  });

  it('refuses a server name no certificate covers: the handshake fails', async () => {
    const port = service.edgeHttpsPort!;
    await expect(servedFingerprint(port, 'nobody.sni-e2e.example.org')).rejects.toThrow(
      /handshake failure|alert number 40/,
    );
    await expect(curlHttps(port, 'nobody.sni-e2e.example.org', '/', caFile)).rejects.toThrow(
      /handshake failure|alert/i,
    );
    // A name under the reserved domain is not covered by its certificate either.
    await expect(servedFingerprint(port, `x.${HOST}`)).rejects.toThrow(/handshake failure/);
  });

  it('serves the replacement once the domain points at it (PATCH certificate_id)', async () => {
    const port = service.edgeHttpsPort!;
    const second = serverCertificate('second', [HOST, `www.${HOST}`]);
    const secondId = await upload(second);
    // Uploading alone changes nothing: the domain still names the first one.
    expect(await servedFingerprint(port, HOST)).toBe(fingerprintOf(first));
    const patched = await api('PATCH', `/reserved_domains/${domainId}`, {
      certificate_id: secondId,
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(await servedFingerprint(port, HOST)).toBe(fingerprintOf(second));
    expect((await curlHttps(port, HOST, '/after', caFile)).status).toBe(200);
    // Without a certificate the domain is refused again.
    expect((await api('DELETE', `/reserved_domains/${domainId}/certificate`)).status).toBe(204);
    await expect(servedFingerprint(port, HOST)).rejects.toThrow(/handshake failure/);
  });

  it("serves an Agent Ingress's automatic certificate for its domain, region domains and names under them", async () => {
    const port = service.edgeHttpsPort!;
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const names = [
      INGRESS,
      ...['us', 'eu'].flatMap((r) => [`${r}.${INGRESS}`, `*.${r}.${INGRESS}`]),
    ];
    const automatic = serverCertificate('automatic', names);
    // As the certificate runner stores what ACME issued.
    await service.db.transaction(async (tx) => {
      const row = await storeIssuedCertificate(
        tx,
        {
          accountId,
          certificatePem: automatic.cert,
          privateKeyPem: automatic.key,
          issuedAt: new Date(),
        },
        { keyring: service.keyring, publicUrl: service.url },
      );
      await tx.query('UPDATE agent_ingresses SET certificate_id = $1 WHERE domain = $2', [
        row.id,
        INGRESS,
      ]);
    });
    for (const name of [INGRESS, `eu.${INGRESS}`, `app.us.${INGRESS}`]) {
      expect(await servedFingerprint(port, name)).toBe(fingerprintOf(automatic));
    }
    // Two labels under a region domain: no SAN covers it.
    await expect(servedFingerprint(port, `a.b.us.${INGRESS}`)).rejects.toThrow(/handshake failure/);
    // An uploaded certificate on a reserved domain under the ingress wins over the automatic one.
    const pinnedName = `pinned.us.${INGRESS}`;
    const pinned = serverCertificate('pinned', [pinnedName]);
    const reserved = await api('POST', '/reserved_domains', {
      domain: pinnedName,
      certificate_id: await upload(pinned),
    });
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(201);
    expect(await servedFingerprint(port, pinnedName)).toBe(fingerprintOf(pinned));
  });
});
