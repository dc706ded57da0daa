import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapToLoopback } from '../helpers/etc-hosts.ts';
import { freePort } from '../helpers/free-port.ts';
import { giveIngressCertificate } from '../helpers/ingress-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';
import { otherAccountClient, useTestService } from '../helpers/service.ts';
import { curl, eventually, type SshAgent, startSshAgent } from './agents-helpers.ts';
import { boundAgent, eventsOf, trafficEvents } from './edge-helpers.ts';
import { echoWebSocket, webSocketVia } from './websocket-echo.ts';

// Internal endpoints and agent endpoint policies, through the edge with curl: `ssh -R
// <name>.internal` and the real @ngrok/ngrok SDK bind internal endpoints that only a cloud
// endpoint's forward-internal of the same account reaches; the SDK's traffic_policy and its
// older module options (basic_auth) run at the edge for its endpoint.

const INGRESS = 'internal-e2e.example.net';
const DIALLED = `us.${INGRESS}`;
const FRONT = `front.${INGRESS}`;

const FRONT_POLICY = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/ssh')"]
    actions:
      - type: forward-internal
        config: {url: "http://api.internal"}
  - expressions: ["req.url.path.startsWith('/sdk')"]
    actions:
      - type: forward-internal
        config: {url: "https://sdk.internal"}
  - expressions: ["req.url.path.startsWith('/theirs')"]
    actions:
      - type: forward-internal
        config: {url: "http://theirs.internal"}
  - expressions: ["req.url.path.startsWith('/fallback')"]
    actions:
      - type: forward-internal
        config: {url: "http://gone.internal", on_error: continue}
      - type: custom-response
        config: {status_code: 503, body: "down for maintenance"}
  - actions:
      - type: forward-internal
        config: {url: "http://gone.internal"}
`;

/** A local service that says who it is and what it received. */
async function localService(who: string): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    request.resume();
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ who, url: request.url, headers: request.headers }));
  });
  server.on('upgrade', (request, socket) =>
    echoWebSocket(request, socket, { sent: 0, received: 0 }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

const basic = (user: string, password: string) =>
  `Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('internal endpoints and agent endpoint policies', () => {
  const ctx = useTestService(undefined, async () => ({
    REGIONS: 'us',
    AGENT_PORT: String(await freePort()),
  }));
  const pki = new OpensslPki();
  let ca: Issued;
  let authtoken: string;
  let unmap: () => void = () => {};
  const agents: SshAgent[] = [];
  const servers: Server[] = [];
  let events: () => any[];
  let sdkPort: number;

  const service = async (who: string) => {
    const local = await localService(who);
    servers.push(local.server);
    return local.port;
  };
  const forward = (options: Record<string, unknown>) =>
    ngrok.forward({
      addr: sdkPort,
      authtoken,
      server_addr: `${DIALLED}:${ctx.service.agentPort}`,
      session_ca_cert: ca.cert,
      force_new_session: true,
      ...options,
    });
  const refusalOf = (options: Record<string, unknown>) =>
    forward(options).then(
      () => 'bound',
      (error: Error) => error.message,
    );
  const edge = (host: string, path: string, extra: string[] = []) =>
    curl(ctx.service.edgePort!, host, path, extra);

  beforeAll(async () => {
    const accountId = (await ctx.api('GET', '/account')).body.id;
    expect((await ctx.api('POST', '/agent_ingresses', { domain: INGRESS })).status).toBe(201);
    ca = pki.selfSigned('ca', { subject: '/CN=internal e2e CA', extensions: CA_EXTENSIONS });
    const names = [INGRESS, DIALLED, `*.${DIALLED}`, `*.${INGRESS}`];
    await giveIngressCertificate(ctx.service, pki, ca, { accountId, domain: INGRESS, names });
    authtoken = (await ctx.api('POST', '/credentials', {})).body.token;
    unmap = mapToLoopback([DIALLED]);
    events = await trafficEvents(ctx, 'internal');
    sdkPort = await service('sdk');
    agents.push(await boundAgent(ctx, 'api.internal', await service('ssh')));
    // Another account binds the same internal name, and one of its own.
    const other = await otherAccountClient(ctx.service);
    const theirToken = (await other('POST', '/credentials', {})).body.token;
    for (const hostname of ['api.internal', 'theirs.internal']) {
      const agent = startSshAgent(ctx.service, {
        user: theirToken,
        hostname,
        localPort: await service('other account'),
      });
      agents.push(agent);
      await eventually(async () => {
        if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
        const list = (await other('GET', '/tunnel_sessions')).body.tunnel_sessions;
        return list.find((s: { metadata: string }) => s.metadata === hostname);
      }, `the other account's ${hostname}`);
    }
    await forward({
      domain: 'sdk.internal',
      traffic_policy: `on_http_request:\n  - actions: [{type: add-headers, config: {headers: {x-internal: "\${endpoint.host}"}}}]\n`,
    });
    const created = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${FRONT}`,
      traffic_policy: FRONT_POLICY,
    });
    expect(created.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    await Promise.all(agents.map((agent) => agent.kill()));
    for (const server of servers) server.close();
    pki.close();
  });

  it("forwards to an ssh -R internal endpoint of the account, recorded once as the cloud endpoint's request", async () => {
    const answer = await edge(FRONT, '/ssh/hello?x=1');
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body);
    // The same name bound by another account is never this account's backend.
    expect(seen.who).toBe('ssh');
    expect(seen.url).toBe('/ssh/hello?x=1');
    expect(seen.headers.host).toBe(FRONT);
    const [event] = await eventsOf(events, '/ssh/hello', 1);
    expect(event.http.response.status_code).toBe(200);
    expect(event.http.request.url.host).toBe(FRONT);
    // A later request's event has come: the first one was written once.
    expect((await edge(FRONT, '/ssh/after')).status).toBe(200);
    await eventsOf(events, '/ssh/after');
    expect(events().filter((e) => e.http.request.url.path === '/ssh/hello')).toHaveLength(1);
  });

  it('lists internal agent endpoints by name, bound internally, each account its own', async () => {
    const list = (await ctx.api('GET', '/endpoints')).body.endpoints;
    const internal = list.filter((e: { bindings: string[] }) => e.bindings[0] === 'internal');
    expect(internal.map((e: { url: string }) => e.url).sort()).toEqual([
      'http://api.internal',
      'https://sdk.internal',
    ]);
    expect(internal[0]).toMatchObject({ type: 'agent' });
  });

  it('carries a WebSocket through forward-internal to the internal endpoint and back', async () => {
    const socket = await webSocketVia(`ws://${FRONT}:${ctx.service.edgePort}/ssh/chat`);
    await once(socket, 'open');
    const echoed = once(socket, 'message');
    socket.send('hello, internal');
    const [message] = (await echoed) as [MessageEvent];
    expect(message.data).toBe('hello, internal');
    socket.close();
  });

  it('forwards to an SDK internal endpoint (Bind with domain sdk.internal), whose own policy runs', async () => {
    const answer = await edge(FRONT, '/sdk/x');
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body);
    expect(seen.who).toBe('sdk');
    expect(seen.headers['x-internal']).toBe('sdk.internal');
  });

  it("runs a cloud endpoint's policy, then the agent endpoint's, on one hostname", async () => {
    const host = `both.${DIALLED}`;
    const phase = (who: string) =>
      `  - actions: [{type: add-headers, config: {headers: {x-order: ${who}}}}]\n`;
    const policy = (who: string) =>
      `on_http_request:\n${phase(who)}on_http_response:\n${phase(who)}`;
    await forward({ domain: host, traffic_policy: policy('agent') });
    const created = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://${host}`,
      traffic_policy: policy('cloud'),
    });
    expect(created.status).toBe(201);
    const answer = await edge(host, '/both');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).headers['x-order']).toBe('cloud, agent');
    // Responses go back the other way: the agent endpoint's phase first.
    expect(answer.headers.match(/^x-order: .*$/gim)).toEqual(['x-order: agent', 'x-order: cloud']);
  });

  it('never serves an internal endpoint by Host, nor another account’s by forward-internal', async () => {
    for (const host of ['api.internal', 'sdk.internal', 'theirs.internal']) {
      const direct = await edge(host, '/direct');
      expect(direct.status).toBe(502);
      expect(direct.body).not.toMatch(/"who"/);
    }
    const theirs = await edge(FRONT, '/theirs');
    expect(theirs.status).toBe(404);
    expect(theirs.body).toMatch(/http:\/\/theirs\.internal is offline.*ERR_NGROK_3200/s);
  });

  it('halts with 404 on an offline internal endpoint, or goes on with on_error: continue', async () => {
    const halted = await edge(FRONT, '/halt');
    expect(halted.status).toBe(404);
    expect(halted.body).toMatch(/ERR_NGROK_3200/);
    const fallback = await edge(FRONT, '/fallback');
    expect(fallback.status).toBe(503);
    expect(fallback.body).toBe('down for maintenance');
  });

  it("runs an SDK agent's traffic_policy at the edge for its endpoint", async () => {
    const policy = `
on_http_request:
  - actions:
      - type: basic-auth
        config: {credentials: ["ada:analytical engine"]}
      - type: add-headers
        config: {headers: {x-agent-user: "\${actions.ngrok.basic_auth.credentials.username}"}}
on_http_response:
  - actions:
      - type: add-headers
        config: {headers: {x-policy: agent}}
`;
    const host = `policy.${DIALLED}`;
    await forward({ domain: host, traffic_policy: policy });
    const denied = await edge(host, '/agent-policy');
    expect(denied.status).toBe(401);
    expect(denied.body).not.toMatch(/"who"/);
    const allowed = await edge(host, '/agent-policy', ['-H', basic('ada', 'analytical engine')]);
    expect(allowed.status).toBe(200);
    expect(allowed.headers).toMatch(/x-policy: agent/i);
    expect(JSON.parse(allowed.body).headers['x-agent-user']).toBe('ada');
    const [, ok] = await eventsOf(events, '/agent-policy', 2);
    expect(ok.basic_auth).toEqual({ decision: 'allow', username: 'ada' });
  });

  it("maps the SDK's basic_auth option onto basic-auth: 401 without credentials", async () => {
    const host = `basic.${DIALLED}`;
    await forward({ domain: host, basic_auth: 'ngrok:online1line' });
    expect((await edge(host, '/basic')).status).toBe(401);
    const allowed = await edge(host, '/basic', ['-H', basic('ngrok', 'online1line')]);
    expect(allowed.status).toBe(200);
    expect(JSON.parse(allowed.body).who).toBe('sdk');
  });

  it('refuses a Bind whose traffic_policy does not compile, with where, as the SDK shows it', async () => {
    const message = await refusalOf({
      domain: `broken.${DIALLED}`,
      traffic_policy:
        'on_http_request:\n  - actions: [{type: add-headers, config: {headers: {x-a: b}, oops: 1}}]\n',
    });
    expect(message).toMatch(
      /invalid traffic_policy: traffic_policy: on_http_request rule 0 action 0 \(add-headers\) config \(document line 2\): unknown field 'oops'/,
    );
  });
});
