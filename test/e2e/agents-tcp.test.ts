import type { AddressInfo } from 'node:net';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import { freePort } from '../helpers/free-port.ts';
import {
  type ApiClient,
  apiClient,
  otherAccountClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { eventually, fileEvents, type SshAgent, startSshAgent } from './agents-helpers.ts';

// TCP endpoints: `ssh -R <reserved port>:localhost:<port>` makes the service listen on the port
// of one of the account's reserved addresses; bytes flow both ways through the SSH channel and
// each closed connection is a tcp_connection_closed.v0.

describe('agents: TCP endpoints on reserved addresses', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let accountId: string;
  let echo: Server;
  let echoPort: number;
  let port: number;
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    store = await pgliteStore();
    port = await freePort();
    service = await startTestService(store, { TCP_ADDR_PORTS: `${port}-${port}` });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoPort = (echo.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.close();
    await service?.close();
    await store?.cleanup();
  });

  /** Sends `text` to the endpoint and resolves with what comes back once the peer closes. */
  function roundTrip(text: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
        if (received.length >= text.length) socket.end();
      });
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
      socket.write(text);
    });
  }

  /** What comes back before the endpoint closes the connection (a refusal: nothing). */
  function closedAfter(text: string): Promise<string> {
    return new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
      });
      socket.on('close', () => resolve(received));
      socket.on('error', () => {}); // a reset is the refusal this waits for
      socket.write(text);
    });
  }

  it('binds a reserved address, carries bytes both ways, and reports each closed connection', async () => {
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'tcp' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const reserved = await api('POST', '/reserved_addrs', {});
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(201);
    const addr: string = reserved.body.addr;
    expect(addr.endsWith(`:${port}`)).toBe(true);

    // A port the account has not reserved is refused, with the reason.
    const { token } = (await api('POST', '/credentials', {})).body;
    const wrong = startSshAgent(service, {
      user: token,
      hostname: '',
      remote: String(port + 1),
      localPort: echoPort,
    });
    agents.push(wrong);
    expect(await wrong.exited).not.toBe(0);
    expect(wrong.output()).toContain(`port ${port + 1} is not a reserved address of this account`);

    const agent = startSshAgent(service, {
      user: token,
      hostname: '',
      remote: String(port),
      localPort: echoPort,
    });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((s: { metadata: string }) => s.metadata === addr);
    }, 'the TCP session');

    const text = 'hello over a reserved address '.repeat(1000);
    expect(await roundTrip(text)).toBe(text);
    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'tcp');
    const [event] = await eventually(() => {
      const found = fileEvents(dir);
      return found.length > 0 ? found : undefined;
    }, 'the tcp_connection_closed.v0 event');
    expect(event).toMatchObject({
      event_type: 'tcp_connection_closed.v0',
      account_id: accountId,
      object: {
        conn: {
          bytes_in: text.length,
          bytes_out: text.length,
          client_ip: '127.0.0.1',
          server_ip: '127.0.0.1',
          server_name: addr.slice(0, addr.lastIndexOf(':')),
          server_port: port,
        },
        ip_policy: { decision: 'invalid' },
      },
    });
    expect(Date.parse(event.object.conn.end_ts)).toBeGreaterThanOrEqual(
      Date.parse(event.object.conn.start_ts),
    );

    // The session's end closes the endpoint.
    await agent.kill();
    await eventually(async () => {
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.length === 0 ? true : undefined;
    }, 'the session to end');
    await expect(roundTrip('x')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('binds with a credential whose acl names the reserved address as host:port (no other port), and says so in a shell', async () => {
    const reserved = (await api('GET', '/reserved_addrs')).body.reserved_addrs;
    const addr: string = reserved[0]?.addr ?? (await api('POST', '/reserved_addrs', {})).body.addr;
    const host = addr.slice(0, addr.lastIndexOf(':'));
    // The address exactly as the API shows it: the rule a new user writes first.
    const exact = await api('POST', '/credentials', { acl: [`bind:${addr}`] });
    expect(exact.status, JSON.stringify(exact.body)).toBe(201);
    const other = await api('POST', '/credentials', { acl: [`bind:${host}:${port + 1}`] });
    expect(other.status, JSON.stringify(other.body)).toBe(201);

    const refused = startSshAgent(service, {
      user: other.body.token,
      hostname: '',
      remote: String(port),
      localPort: echoPort,
    });
    agents.push(refused);
    expect(await refused.exited).not.toBe(0);
    expect(refused.output()).toContain(`the credential's acl does not allow binding "${addr}"`);

    // Without -N (a shell), ssh prints the address the connection serves.
    const agent = startSshAgent(service, {
      user: exact.body.token,
      hostname: '',
      remote: String(port),
      localPort: echoPort,
      shell: true,
    });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((s: { metadata: string }) => s.metadata === addr);
    }, 'the TCP session bound under the host:port rule');
    expect(await roundTrip('through an address rule')).toBe('through an address rule');
    await eventually(
      () => (agent.output().includes(`this connection serves tcp://${addr}`) ? true : undefined),
      'the shell line',
    );
    await agent.kill();
  });

  it('runs the on_tcp_connect of a cloud endpoint on the reserved address before dialling the agent', async () => {
    const reserved = (await api('GET', '/reserved_addrs')).body.reserved_addrs;
    const addr: string = reserved[0].addr;
    const host = addr.slice(0, addr.lastIndexOf(':'));
    const endpoint = (traffic_policy: string, url = `tcp://${addr}`) =>
      api('POST', '/endpoints', { type: 'cloud', url, traffic_policy });

    // What a TCP endpoint cannot run is refused at create, with where.
    const http = await endpoint('on_http_request:\n  - actions: [{type: deny}]\n');
    expect(http.status).toBe(400);
    expect(http.body.details.location).toEqual({ phase: 'on_http_request', line: 2 });
    expect(http.body.msg).toContain(
      'a tcp endpoint runs on_tcp_connect only; on_http_request is for http and https endpoints',
    );
    const headers = await endpoint(
      'on_tcp_connect:\n  - actions: [{type: add-headers, config: {headers: {a: b}}}]\n',
    );
    expect(headers.status).toBe(400);
    expect(headers.body.details.location).toMatchObject({
      phase: 'on_tcp_connect',
      rule: { index: 0 },
      action: { index: 0, type: 'add-headers' },
    });
    const request = await endpoint(
      'on_tcp_connect:\n  - expressions: ["req.method == \'GET\'"]\n    actions: [{type: deny}]\n',
    );
    expect(request.status).toBe(400);
    expect(request.body.msg).toContain(
      "'req.method' is not available on a TCP endpoint: its connections carry no HTTP request",
    );
    const notHeld = await endpoint('on_tcp_connect: []\n', `tcp://${host}:${port + 1}`);
    expect(notHeld.status).toBe(400);
    expect(notHeld.body.msg).toContain(`${host}:${port + 1} is not a reserved address`);
    // Another account cannot put a policy on this account's address.
    const other = await otherAccountClient(service);
    const claimed = await other('POST', '/endpoints', {
      type: 'cloud',
      url: `tcp://${addr}`,
      traffic_policy: 'on_tcp_connect:\n  - actions: [{type: deny}]\n',
    });
    expect(claimed.status).toBe(400);
    expect(claimed.body.msg).toContain(`${addr} is not a reserved address of this account`);

    const created = await endpoint(`
on_tcp_connect:
  - actions:
      - type: set-vars
        config: {vars: [{who: "\${conn.client_ip}"}]}
      - type: log
        config: {metadata: {who: "\${vars.who}", addr: "\${endpoint.addr}", phase: connect}}
      - type: restrict-ips
        config: {allow: [127.0.0.1/32]}
`);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ url: `tcp://${addr}`, proto: 'tcp', hostport: addr });
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'tcp-policy' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'tcp-policy');
    const nthEvent = (n: number) =>
      eventually(() => fileEvents(dir)[n - 1]?.object, `tcp_connection_closed.v0 #${n}`);

    const { token } = (await api('POST', '/credentials', {})).body;
    const agent = startSshAgent(service, {
      user: token,
      hostname: '',
      remote: String(port),
      localPort: echoPort,
    });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((s: { metadata: string }) => s.metadata === addr);
    }, 'the TCP session');

    // Allowed: the bytes flow; the event says allow and carries the log.
    expect(await roundTrip('let me in')).toBe('let me in');
    const allowed = await nthEvent(1);
    expect(allowed.ip_policy).toEqual({ decision: 'allow' });
    expect(allowed.traffic_policy).toEqual({
      logs: [{ who: '127.0.0.1', addr, phase: 'connect' }],
    });
    expect(allowed.conn).toMatchObject({ bytes_in: 9, bytes_out: 9 });

    // Denied by restrict-ips: closed before the agent is dialled; block, no bytes.
    const update = (traffic_policy: string) =>
      api('PATCH', `/endpoints/${created.body.id}`, { traffic_policy });
    expect(
      (
        await update(`
on_tcp_connect:
  - actions:
      - type: log
        config: {metadata: {phase: connect}}
      - type: restrict-ips
        config: {allow: [0.0.0.0/0], deny: [127.0.0.1/32]}
      - type: log
        config: {metadata: {never: logged}}
`)
      ).status,
    ).toBe(200);
    expect(await closedAfter('let me in')).toBe('');
    const blocked = await nthEvent(2);
    expect(blocked.ip_policy).toEqual({ decision: 'block' });
    expect(blocked.traffic_policy).toEqual({ logs: [{ phase: 'connect' }] });
    expect(blocked.conn).toMatchObject({ bytes_in: 0, bytes_out: 0 });

    // deny and close-connection end the connection the same way; the IP module did not run.
    for (const type of ['deny', 'close-connection']) {
      const n = type === 'deny' ? 3 : 4;
      const changed = await update(`
on_tcp_connect:
  - expressions: ["inCidrRange(conn.client_ip, '127.0.0.0/8')", "conn.server_port == ${port}"]
    actions:
      - type: log
        config: {metadata: {action: ${type}}}
      - type: ${type}
`);
      expect(changed.status, JSON.stringify(changed.body)).toBe(200);
      expect(await closedAfter('let me in')).toBe('');
      const event = await nthEvent(n);
      expect(event.ip_policy).toEqual({ decision: 'invalid' });
      expect(event.traffic_policy).toEqual({ logs: [{ action: type }] });
      expect(event.conn).toMatchObject({ bytes_in: 0, bytes_out: 0 });
    }
    await agent.kill();
  });
});
