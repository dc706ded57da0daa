import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestService } from '../helpers/service.ts';
import { curl, type SshAgent } from './agents-helpers.ts';
import { boundAgent, eventsOf, trafficEvents } from './edge-helpers.ts';

// A cloud endpoint's Traffic Policy on the hostname an `ssh -R` agent serves: curl through the
// edge, the agent's server, and the http_request_complete.v0 a file destination received.

const DOMAIN = 'edge-policy.example.com';
const HOST = `app.${DOMAIN}`;
const ALONE = `static.${DOMAIN}`;
const UNSENDABLE = `crlf.${DOMAIN}`;

const POLICY = `
on_http_request:
  - name: who
    actions:
      - type: basic-auth
        config:
          realm: staging
          credentials: ["ada:analytical engine"]
      - type: add-headers
        config:
          headers:
            x-user: "\${actions.ngrok.basic_auth.credentials.username}"
            x-client-ip: "\${conn.client_ip}"
      - type: log
        config:
          metadata:
            user: "\${actions.ngrok.basic_auth.credentials.username}"
            path: "\${req.url.path}"
on_http_response:
  - expressions: ["req.url.path.startsWith('/big')"]
    actions:
      - type: compress-response
        config: {algorithms: [gzip]}
`;

const basic = (user: string, password: string) =>
  `Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe("the edge runs a cloud endpoint's Traffic Policy", () => {
  const ctx = useTestService();
  let agent: SshAgent;
  let crlfAgent: SshAgent;
  let local: Server;
  /** The paths the agents' server received. */
  const seen: string[] = [];
  let unsendableId: string | undefined;
  let events: () => any[];

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'policy');
    local = createServer((request, response) => {
      seen.push(request.url!);
      request.resume();
      // /huge: more than the edge buffers of an answer whose head waits for on_http_response.
      const text = request.url?.startsWith('/big')
        ? 'x'.repeat(20_000)
        : request.url === '/huge'
          ? 'x'.repeat(1024 * 1024)
          : JSON.stringify({ url: request.url, headers: request.headers });
      response.writeHead(200, { 'content-type': 'application/json' }).end(text);
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    agent = await boundAgent(ctx, HOST, (local.address() as AddressInfo).port);
    crlfAgent = await boundAgent(ctx, UNSENDABLE, (local.address() as AddressInfo).port);
    const created = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${HOST}`,
      traffic_policy: POLICY,
    });
    expect(created.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await agent?.kill();
    await crlfAgent?.kill();
    local?.close();
  });

  it('refuses a request without credentials with 401, and the event says basic_auth block', async () => {
    const answer = await curl(ctx.service.edgePort!, HOST, '/denied');
    expect(answer.status).toBe(401);
    expect(answer.headers).toMatch(/www-authenticate: Basic realm="staging", charset="UTF-8"/i);
    const [event] = await eventsOf(events, '/denied');
    expect(event.basic_auth).toEqual({ decision: 'block', username: '' });
    expect(event.http.response.status_code).toBe(401);
    expect(event.traffic_policy.logs).toEqual([]);
  });

  it('lets the right user through with the added headers; the event carries the decision and the log', async () => {
    const answer = await curl(ctx.service.edgePort!, HOST, '/hello?x=1', [
      '-H',
      basic('ada', 'analytical engine'),
    ]);
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body);
    expect(seen.url).toBe('/hello?x=1');
    expect(seen.headers['x-user']).toBe('ada');
    expect(seen.headers['x-client-ip']).toBe('127.0.0.1');
    const [event] = await eventsOf(events, '/hello');
    expect(event.basic_auth).toEqual({ decision: 'allow', username: 'ada' });
    expect(event.traffic_policy.logs).toEqual([{ user: 'ada', path: '/hello' }]);
    expect(event.ip_policy.decision).toBe('invalid');
    expect(event.compression).toEqual({ algorithm: 'none', bytes_saved: 0 });
  });

  it('runs the policy on an Upgrade too: no credentials, no WebSocket', async () => {
    const answer = await curl(ctx.service.edgePort!, HOST, '/socket', [
      '-H',
      'Connection: Upgrade',
      '-H',
      'Upgrade: websocket',
    ]);
    expect(answer.status).toBe(401);
    const [event] = await eventsOf(events, '/socket');
    expect(event.basic_auth).toEqual({ decision: 'block', username: '' });
  });

  it('compresses the answer with gzip when the client accepts it, and says how much it saved', async () => {
    const answer = await curl(ctx.service.edgePort!, HOST, '/big', [
      '-H',
      basic('ada', 'analytical engine'),
      '-H',
      'Accept-Encoding: gzip',
    ]);
    expect(answer.headers).toMatch(/content-encoding: gzip/i);
    const [event] = await eventsOf(events, '/big');
    expect(event.compression.algorithm).toBe('gzip');
    expect(Number(event.compression.bytes_saved)).toBeGreaterThan(19_000);
  });

  it('answers for a cloud endpoint with no agent with its policy alone', async () => {
    const created = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${ALONE}`,
      traffic_policy:
        'on_http_request:\n  - actions:\n      - type: custom-response\n        config: {status_code: 418, body: "short and stout", headers: {x-from: policy}}\n',
    });
    expect(created.status).toBe(201);
    const answer = await curl(ctx.service.edgePort!, ALONE, '/tea');
    expect(answer.status).toBe(418);
    expect(answer.body).toBe('short and stout');
    expect(answer.headers).toMatch(/x-from: policy/i);
    const [event] = await eventsOf(events, '/tea');
    expect(event.http.response.status_code).toBe(418);
    expect(event.basic_auth.decision).toBe('invalid');
  });

  it("answers 502 for a request a policy's added header made unsendable (a CR LF in its value); the agent sees nothing", async () => {
    // Written into the policy, it is refused when saved; from the client's own input (its
    // query, decoded), it is found as the head is sent.
    const literal = await saveUnsendable(
      addHeader('on_http_request', '"one\\r\\nx-injected: yes"'),
    );
    expect(literal.status).toBe(400);
    expect(JSON.stringify(literal.body)).toMatch(/a header value cannot hold a CR, LF or NUL/);
    await setPolicy(addHeader('on_http_request', FROM_QUERY));
    const split = await curl(ctx.service.edgePort!, UNSENDABLE, `/split?name=${INJECTED}`);
    expect(split.status).toBe(502);
    expect(split.body).toContain(`The request for ${UNSENDABLE} cannot be sent to its agent.`);
    // The agent's channel was not touched: the next request goes through, with its header.
    const named = await curl(ctx.service.edgePort!, UNSENDABLE, '/named?name=ada');
    expect(named.status).toBe(200);
    expect(JSON.parse(named.body).headers).toMatchObject({ 'x-name': 'ada' });
    expect(JSON.parse(named.body).headers).not.toHaveProperty('x-injected');
    expect(seen.filter((path) => path.startsWith('/split'))).toEqual([]);
    await expectEdge502(['/split']);
    const [splitEvent] = await eventsOf(events, '/split');
    expect(splitEvent.http.response.body_length).toBe(0);
    expect(splitEvent.backend.connection_reused).toBe(false);
  });

  it("answers 502 for an answer a policy's header made unsendable, the agent's or its own", async () => {
    await setPolicy(addHeader('on_http_response', FROM_QUERY));
    const agents = await curl(ctx.service.edgePort!, UNSENDABLE, `/huge?name=${INJECTED}`);
    expect(agents.status).toBe(502);
    expect(agents.body).toContain(
      'The endpoint policy made an answer head that HTTP cannot carry.',
    );
    expect(agents.headers).not.toMatch(/x-injected/i);
    expect(seen.some((path) => path.startsWith('/huge?'))).toBe(true);
    const own = `on_http_request:
  - actions:
      - type: custom-response
        config: {status_code: 200, body: own, headers: {x-name: ${FROM_QUERY}}}
`;
    await setPolicy(own);
    const policys = await curl(ctx.service.edgePort!, UNSENDABLE, `/own?name=${INJECTED}`);
    expect(policys.status).toBe(502);
    expect(policys.headers).not.toMatch(/x-injected/i);
    await expectEdge502(['/huge', '/own']);
    // The agent's channel went back to its pool: the next request reuses it.
    await setPolicy(addHeader('on_http_request', 'fine'));
    expect((await curl(ctx.service.edgePort!, UNSENDABLE, '/after')).status).toBe(200);
    const [after] = await eventsOf(events, '/after');
    expect(after.backend.connection_reused).toBe(true);
  });

  /** Puts `policy` on the cloud endpoint of UNSENDABLE (made on first use). */
  async function setPolicy(policy: string) {
    const saved = await saveUnsendable(policy);
    expect(saved.status, JSON.stringify(saved.body)).toBeLessThan(300);
    unsendableId = saved.body.id;
  }

  /** Saves `policy` on the cloud endpoint of UNSENDABLE (made on first use): the API's answer. */
  function saveUnsendable(policy: string) {
    return unsendableId === undefined
      ? ctx.api('POST', '/endpoints', {
          type: 'cloud',
          url: `http://${UNSENDABLE}`,
          traffic_policy: policy,
        })
      : ctx.api('PATCH', `/endpoints/${unsendableId}`, { traffic_policy: policy });
  }

  /** The events of `paths` say the edge's 502. */
  async function expectEdge502(paths: string[]) {
    for (const path of paths) {
      const [event] = await eventsOf(events, path);
      expect(event.http.response.status_code, path).toBe(502);
    }
  }
});

// A header value from the client's input, and input that would split the head it goes into.
const FROM_QUERY = `"\${getQueryParam('name')[0]}"`;
const INJECTED = 'a%0D%0Ax-injected:1';

/** A Traffic Policy that adds `x-name` with `value` (YAML) in `phase`. */
function addHeader(phase: string, value: string): string {
  return `${phase}:\n  - actions:\n      - type: add-headers\n        config:\n          headers:\n            x-name: ${value}\n`;
}
