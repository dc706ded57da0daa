import ngrok from '@ngrok/ngrok';
import { Ngrok } from '@ngrok/ngrok-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { clientDelete } from '../helpers/ngrok-client.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { eventually, type SshAgent, startEchoServer, startSshAgent } from './agents-helpers.ts';

// The API controls and shows what agents serve, as ngrok's API does, read and driven by ngrok's
// own API client (@ngrok/ngrok-api): POST /tunnel_sessions/{id}/restart and /update reach the
// real SDK's command handlers (or answer that it has none, or that ssh -R cannot), and GET
// /tunnels and /endpoints list an SDK agent's and an `ssh -R` agent's endpoints in ngrok's shapes.

const INGRESS = 'ngrok-api.example.net';
const DIALLED = `us.${INGRESS}`;
const WITH_HANDLERS = `handled.us.${INGRESS}`;
const WITHOUT_HANDLERS = `plain.us.${INGRESS}`;
const OVER_SSH = `ssh.us.${INGRESS}`;

describe('agents controlled and listed through the API (ngrok SDK, ssh -R, ngrok API client)', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let client: Ngrok;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  let ssh: SshAgent;
  let unmap: () => void = () => {};
  const pki = new OpensslPki();
  let ca: Issued;
  let authtoken: string;
  const restarts: number[] = [];
  const updates: { version: string; permitMajorVersion: boolean }[] = [];
  const sessions: ngrok.Session[] = [];

  /** An SDK session on the ingress serving `domain`, with or without command handlers. */
  async function sdkAgent(domain: string, handlers: boolean) {
    let builder = new ngrok.SessionBuilder()
      .authtoken(authtoken)
      .serverAddr(`${DIALLED}:${service.agentPort}`)
      .caCert(Buffer.from(ca.cert));
    if (handlers) {
      builder = builder
        .handleRestartCommand(() => restarts.push(Date.now()))
        .handleUpdateCommand((update) =>
          updates.push({ version: update.version, permitMajorVersion: update.permitMajorVersion }),
        );
    }
    const session = await builder.connect();
    sessions.push(session);
    await session.httpEndpoint().domain(domain).listenAndForward(`http://127.0.0.1:${echo.port}`);
  }

  /** The live session serving `url`, as /tunnel_sessions names it (through /tunnels). */
  async function sessionOf(url: string): Promise<string> {
    const tunnels = (await api('GET', '/tunnels')).body.tunnels;
    const tunnel = tunnels.find((t: any) => t.public_url === url);
    expect(tunnel, `a tunnel serving ${url}`).toBeDefined();
    return tunnel.tunnel_session.id;
  }

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, { REGIONS: 'us' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    client = new Ngrok({ baseUrl: service.url, apiToken: TEST_BOOTSTRAP_KEY });
    const accountId = (await api('GET', '/account')).body.id;
    echo = await startEchoServer();
    ca = pki.selfSigned('ca', { subject: '/CN=ngrok api e2e CA', extensions: CA_EXTENSIONS });
    expect((await api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    const names = [INGRESS, DIALLED, `*.${DIALLED}`];
    await giveIngressCertificate(service, pki, ca, { accountId, domain: INGRESS, names });
    const credential = await api('POST', '/credentials', { description: 'api control' });
    authtoken = credential.body.token;
    unmap = mapToLoopback([DIALLED]);
    ssh = startSshAgent(service, { user: authtoken, hostname: OVER_SSH, localPort: echo.port });
    await Promise.all([sdkAgent(WITH_HANDLERS, true), sdkAgent(WITHOUT_HANDLERS, false)]);
    await eventually(async () => {
      const { tunnels } = (await api('GET', '/tunnels')).body;
      return tunnels.length === 3 ? true : undefined;
    }, 'three tunnels');
  });
  afterAll(async () => {
    await Promise.all(sessions.map((session) => session.close().catch(() => {})));
    await ssh?.kill();
    unmap();
    echo?.server.close();
    await service?.close();
    await store?.cleanup();
    pki.close();
  });

  it('restarts an SDK agent with a restart handler: the handler runs, the API answers 204', async () => {
    const id = await sessionOf(`https://${WITH_HANDLERS}`);
    // ngrok's client parses the empty 204 as JSON and rejects, as against api.ngrok.com.
    await clientDelete(() => client.tunnelSessions.restart(id));
    // The SDK answers once it has queued the handler's call to JavaScript: it runs soon after.
    await expect.poll(() => restarts, { timeout: 5_000 }).toHaveLength(1);
    const update = await api('POST', `/tunnel_sessions/${id}/update`, {
      version: '3.1.0',
      permit_major_version: true,
    });
    expect(update.status).toBe(204);
    await expect
      .poll(() => updates, { timeout: 5_000 })
      .toEqual([{ version: '3.1.0', permitMajorVersion: true }]);
    await clientDelete(() => client.tunnelSessions.update({ id }));
    await expect
      .poll(() => updates.at(-1), { timeout: 5_000 })
      .toEqual({ version: '', permitMajorVersion: false });
  });

  it('answers 409 ERR_AGENT_COMMAND_UNSUPPORTED for an SDK agent without handlers', async () => {
    const id = await sessionOf(`https://${WITHOUT_HANDLERS}`);
    for (const command of ['restart', 'update']) {
      const answer = await api('POST', `/tunnel_sessions/${id}/${command}`);
      expect(answer.status).toBe(409);
      expect(answer.body).toMatchObject({
        error_code: 'ERR_AGENT_COMMAND_UNSUPPORTED',
        msg: `the agent does not support the ${command} command: "the agent has not defined a callback for this operation"`,
        details: {
          command,
          agent_error: 'the agent has not defined a callback for this operation',
        },
      });
    }
    const viaClient = await client.tunnelSessions.restart(id).then(
      () => undefined,
      (error: any) => error,
    );
    expect(viaClient?.errorCode ?? viaClient?.message).toMatch(/ERR_AGENT_COMMAND_UNSUPPORTED/);
  });

  it('answers 409 for an ssh -R session, and 404 and 400 for what is no command', async () => {
    const id = await sessionOf(`http://${OVER_SSH}`);
    const answer = await api('POST', `/tunnel_sessions/${id}/restart`);
    expect(answer.status).toBe(409);
    expect(answer.body).toMatchObject({
      error_code: 'ERR_AGENT_COMMAND_UNSUPPORTED',
      msg: `session ${id} is an ssh -R session: its agent cannot be told to restart; only ngrok agents can`,
    });
    expect((await api('POST', '/tunnel_sessions/ts_nope/restart')).status).toBe(404);
    const bad = await api('POST', `/tunnel_sessions/${id}/update`, { version: 3 });
    expect(bad.body).toMatchObject({ error_code: 'ERR_INVALID_FIELD' });
    const unknown = await api('POST', `/tunnel_sessions/${id}/update`, { channel: 'beta' });
    expect(unknown.body).toMatchObject({ error_code: 'ERR_UNKNOWN_FIELD' });
  });

  it("lists what the SDK and ssh -R agents serve in ngrok's Tunnel shape, a page at a time", async () => {
    // A page of one: ngrok's client follows next_page_uri through all three.
    const tunnels = await client.tunnels.list(undefined, '1');
    expect(tunnels.map((t) => t.publicUrl).sort()).toEqual(
      [`http://${OVER_SSH}`, `https://${WITHOUT_HANDLERS}`, `https://${WITH_HANDLERS}`].sort(),
    );
    const sdk = tunnels.find((t) => t.publicUrl === `https://${WITH_HANDLERS}`)!;
    const session = (await api('GET', `/tunnel_sessions/${sdk.tunnelSession.id}`)).body;
    expect(session).toMatchObject({ transport: 'ngrok' });
    expect(sdk).toEqual({
      id: sdk.tunnelSession.id.replace(/^ts_/, 'tn_'),
      publicUrl: `https://${WITH_HANDLERS}`,
      startedAt: session.started_at,
      metadata: '',
      proto: 'https',
      region: 'us',
      tunnelSession: { id: session.id, uri: session.uri },
      endpoint: {
        id: sdk.tunnelSession.id.replace(/^ts_/, 'ep_'),
        uri: `${service.url}/endpoints/${sdk.tunnelSession.id.replace(/^ts_/, 'ep_')}`,
      },
      forwardsTo: `http://127.0.0.1:${echo.port}/`,
    });
    const overSsh = tunnels.find((t) => t.publicUrl === `http://${OVER_SSH}`)!;
    expect(overSsh).toMatchObject({ proto: 'http', metadata: OVER_SSH, forwardsTo: '' });
    expect(await client.tunnels.get(overSsh.id)).toEqual(overSsh);
    const missing = await api('GET', '/tunnels/tn_01jb00000000000000000000zz');
    expect(missing.status).toBe(404);
  });

  it('lists agent endpoints beside cloud ones, and refuses to change an agent endpoint', async () => {
    const cloud = await api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://cloud.us.${INGRESS}`,
      traffic_policy: 'on_http_request:\n  - actions: [{type: deny}]\n',
    });
    expect(cloud.status).toBe(201);
    const endpoints = await client.endpoints.list(undefined, '2');
    expect(endpoints.map((e) => `${e.type} ${e.publicUrl}`).sort()).toEqual(
      [
        `agent http://${OVER_SSH}`,
        `agent https://${WITHOUT_HANDLERS}`,
        `agent https://${WITH_HANDLERS}`,
        `cloud https://cloud.us.${INGRESS}`,
      ].sort(),
    );
    const tunnel = (await client.tunnels.list()).find((t) => t.publicUrl === `http://${OVER_SSH}`)!;
    const agent = await api('GET', `/endpoints/${tunnel.endpoint!.id}`);
    expect(agent.body).toEqual({
      id: tunnel.endpoint!.id,
      uri: tunnel.endpoint!.uri,
      created_at: tunnel.startedAt,
      updated_at: tunnel.startedAt,
      description: '',
      metadata: '',
      type: 'agent',
      url: `http://${OVER_SSH}`,
      traffic_policy: null,
      public_url: `http://${OVER_SSH}`,
      proto: 'http',
      hostport: `${OVER_SSH}:80`,
      bindings: ['public'],
      region: 'us',
      upstream_url: '',
      tunnel: { id: tunnel.id, uri: `${service.url}/tunnels/${tunnel.id}` },
      tunnel_session: {
        id: tunnel.tunnelSession.id,
        uri: `${service.url}/tunnel_sessions/${tunnel.tunnelSession.id}`,
      },
      principal: {
        id: expect.stringMatching(/^cr_/),
        uri: expect.stringContaining('/credentials/cr_'),
      },
    });
    // The cloud endpoint keeps its shape: no agent field.
    expect(Object.keys((await api('GET', `/endpoints/${cloud.body.id}`)).body)).toEqual(
      Object.keys(cloud.body),
    );
    for (const [method, body] of [
      ['PATCH', { description: 'x' }],
      ['DELETE', undefined],
    ] as const) {
      const refused = await api(method, `/endpoints/${agent.body.id}`, body);
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({
        error_code: 'ERR_AGENT_ENDPOINT_READ_ONLY',
        details: { tunnel_session: tunnel.tunnelSession.id },
      });
    }
    const made = await api('POST', '/endpoints', {
      type: 'agent',
      url: `https://made.us.${INGRESS}`,
      traffic_policy: 'on_http_request: []\n',
    });
    expect(made.body).toMatchObject({
      error_code: 'ERR_INVALID_FIELD',
      details: { field: 'type' },
    });
  });
});
