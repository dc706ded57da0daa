import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePort } from '../helpers/free-port.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { CA_EXTENSIONS, OpensslPki } from '../helpers/openssl-pki.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { postgresStore, type TestStore } from '../helpers/stores.ts';
import { startEchoServer } from './agents-helpers.ts';

// Two instances on one PostgreSQL store: the ngrok SDK connects to A; a client reaches its
// endpoint through B's edge, which relays to A (INTERNAL_URL) as it does for SSH sessions, and B
// refuses the same name to a second agent.

const INGRESS = 'ngrok-inst-e2e.example.net';
const DIALLED = `us.${INGRESS}`;
const APP = `app.us.${INGRESS}`;

async function curlEdge(port: number, host: string) {
  const { stdout } = await promisify(execFile)(
    'curl',
    ['-sS', '-i', '-H', `Host: ${host}`, `http://127.0.0.1:${port}/via`],
    { encoding: 'utf8', timeout: 20_000 },
  );
  return {
    status: Number(stdout.split(' ')[1]),
    body: stdout.slice(stdout.indexOf('\r\n\r\n') + 4),
  };
}

describe('an ngrok agent on one instance, a client through another (PostgreSQL)', () => {
  let store: TestStore;
  let a: Service;
  let b: Service;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  let unmap: () => void = () => {};
  const pki = new OpensslPki();
  const dirs: string[] = [];
  let caPem: string;
  let authtoken: string;

  async function instance(): Promise<Service> {
    const dir = mkdtempSync(join(tmpdir(), 'agin-ngrok-inst-'));
    dirs.push(dir);
    return startTestService(store, {
      DATA_DIR: dir,
      REGIONS: 'us,eu',
      INTERNAL_URL: `http://127.0.0.1:${await freePort()}`,
    });
  }

  beforeAll(async () => {
    store = await postgresStore();
    a = await instance();
    b = await instance();
    const api = apiClient(a.url, TEST_BOOTSTRAP_KEY);
    const accountId = (await api('GET', '/account')).body.id;
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const ca = pki.selfSigned('ca', {
      subject: '/CN=ngrok instances CA',
      extensions: CA_EXTENSIONS,
    });
    caPem = ca.cert;
    const names = [INGRESS, `us.${INGRESS}`, `*.us.${INGRESS}`];
    await giveIngressCertificate(a, pki, ca, { accountId, domain: INGRESS, names });
    authtoken = (await api('POST', '/credentials', {})).body.token;
    echo = await startEchoServer();
    unmap = mapToLoopback([DIALLED]);
  });
  afterAll(async () => {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    echo?.server.close();
    await b?.close();
    await a?.close();
    await store?.cleanup();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    pki.close();
  });

  it("serves the agent on A through B's edge, and refuses its name to an agent on B", async () => {
    const listener = await ngrok.forward({
      addr: echo.port,
      authtoken,
      server_addr: `${DIALLED}:${a.agentPort}`,
      session_ca_cert: caPem,
      domain: APP,
      force_new_session: true,
    });
    expect(listener.url()).toBe(`https://${APP}`);
    const through = await curlEdge(b.edgePort!, APP);
    expect(through.status).toBe(200);
    expect(JSON.parse(through.body)).toMatchObject({ url: '/via', host: APP });
    const second = await ngrok
      .forward({
        addr: echo.port,
        authtoken,
        server_addr: `${DIALLED}:${b.agentPort}`,
        session_ca_cert: caPem,
        domain: APP,
        force_new_session: true,
      })
      .then(
        () => undefined,
        (error: Error & { errorCode?: string }) => error,
      );
    expect(second?.message).toMatch(/already bound by session ts_/);
    expect(second?.errorCode).toBe('ERR_NGROK_334');
  });

  it("sends restart and update from B's API to the agent on A, and lists it in B's /tunnels", async () => {
    const restarted: string[] = [];
    const session = await new ngrok.SessionBuilder()
      .authtoken(authtoken)
      .serverAddr(`${DIALLED}:${a.agentPort}`)
      .caCert(Buffer.from(caPem))
      .handleRestartCommand(() => restarted.push('restart'))
      .connect();
    try {
      await session
        .httpEndpoint()
        .domain(`cmd.us.${INGRESS}`)
        .listenAndForward(`http://127.0.0.1:${echo.port}`);
      const apiB = apiClient(b.url, TEST_BOOTSTRAP_KEY);
      const { tunnels } = (await apiB('GET', '/tunnels')).body;
      const tunnel = tunnels.find((t: any) => t.public_url === `https://cmd.us.${INGRESS}`);
      // forwards_to as the SDK says it: its URL, normalised.
      expect(tunnel).toMatchObject({
        proto: 'https',
        forwards_to: `http://127.0.0.1:${echo.port}/`,
      });
      const id = tunnel.tunnel_session.id;
      expect((await apiB('POST', `/tunnel_sessions/${id}/restart`)).status).toBe(204);
      await expect.poll(() => restarted, { timeout: 5_000 }).toEqual(['restart']);
      // No update handler: A's answer travels back to B as the same error.
      const update = await apiB('POST', `/tunnel_sessions/${id}/update`, {});
      expect(update.status).toBe(409);
      expect(update.body).toMatchObject({
        error_code: 'ERR_AGENT_COMMAND_UNSUPPORTED',
        details: { command: 'update' },
      });
    } finally {
      await session.close();
    }
  });
});
