import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { curl, eventually, fileEvents, type SshAgent, startSshAgent } from './agents-helpers.ts';
import { type EchoTally, echoWebSocket, webSocketVia } from './websocket-echo.ts';

// The edge's `endpoints` IP restriction decision in its traffic events (`invalid` while the
// account has no such restriction), and WebSockets through the edge with their events.

const DOMAIN = 'agents-policy.example.com';

describe('the edge: IP restriction decisions in events, and WebSockets', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let accountId: string;
  let local: Server;
  let localPort: number;
  const agents: SshAgent[] = [];
  /** What the local server's WebSocket echo received and sent, by request path. */
  const tallies = new Map<string, EchoTally>();

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    expect((await api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    // The agent's local service: plain answers, a WebSocket echo, and an echo protocol after
    // any other Upgrade.
    local = createServer((_request, response) => response.end('plain'));
    local.on('upgrade', (request, socket) => {
      if (request.headers.upgrade === 'websocket') {
        const tally = { received: 0, sent: 0 };
        tallies.set(new URL(request.url ?? '/', 'http://x').pathname, tally);
        return echoWebSocket(request, socket, tally);
      }
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nupgrade: ${request.headers.upgrade}\r\nconnection: Upgrade\r\n\r\n`,
      );
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    localPort = (local.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    local?.close();
    await service?.close();
    await store?.cleanup();
  });

  async function token(): Promise<string> {
    return (await api('POST', '/credentials', {})).body.token;
  }

  async function bound(hostname: string): Promise<SshAgent> {
    const agent = startSshAgent(service, { user: await token(), hostname, localPort });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((s: { metadata: string }) => s.metadata === hostname);
    }, `a session for ${hostname}`);
    return agent;
  }

  /** Opens a WebSocket through the edge; resolves once it is open, or closed without opening. */
  async function webSocket(hostname: string, path: string) {
    const ws = await webSocketVia(`ws://${hostname}:${service.edgePort}${path}`);
    const messages: string[] = [];
    ws.addEventListener('message', (event) => messages.push(String(event.data)));
    const closed = new Promise<void>((resolve) => ws.addEventListener('close', () => resolve()));
    const opened = await Promise.race([
      new Promise<boolean>((resolve) => ws.addEventListener('open', () => resolve(true))),
      closed.then(() => false),
    ]);
    return { ws, messages, opened, closed };
  }

  /** Puts an enforced `endpoints` restriction whose one rule does `action` to 127.0.0.0/8. */
  async function restrictEndpoints(action: 'allow' | 'deny'): Promise<string> {
    const policy = (await api('POST', '/ip_policies', {})).body;
    await api('POST', '/ip_policy_rules', { cidr: '127.0.0.0/8', action, ip_policy_id: policy.id });
    const restriction = await api('POST', '/ip_restrictions', {
      type: 'endpoints',
      enforced: true,
      ip_policy_ids: [policy.id],
    });
    expect(restriction.status).toBe(201);
    return restriction.body.id;
  }

  it('says `invalid` without an `endpoints` IP restriction, else `allow` or `block` (403)', async () => {
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'policy' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [
        {
          type: 'http_request_complete.v0',
          fields: ['ip_policy.decision', 'http.response.status_code', 'http.request.url.path'],
        },
      ],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const hostname = `web.${DOMAIN}`;
    await bound(hostname);
    expect((await curl(service.edgePort!, hostname, '/unrestricted')).body).toBe('plain');
    const deny = await restrictEndpoints('deny');
    const refused = await curl(service.edgePort!, hostname, '/denied');
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('not allowed by an IP restriction');
    // A WebSocket is refused as well, before it reaches the agent.
    const refusedSocket = await webSocket(hostname, '/denied-socket');
    expect(refusedSocket.opened).toBe(false);
    expect(tallies.has('/denied-socket')).toBe(false);
    await api('DELETE', `/ip_restrictions/${deny}`);
    const allow = await restrictEndpoints('allow');
    expect((await curl(service.edgePort!, hostname, '/allowed')).body).toBe('plain');
    await api('DELETE', `/ip_restrictions/${allow}`);
    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'policy');
    const events = await eventually(() => {
      const found = fileEvents(dir);
      return found.length >= 4 ? found : undefined;
    }, 'four traffic events');
    const byPath = (path: string, decision: string, status: number) => ({
      ip_policy: { decision },
      http: { request: { url: { path } }, response: { status_code: status } },
    });
    const objects = events.map((e) => e.object);
    objects.sort((x, y) => (x.http.request.url.path < y.http.request.url.path ? -1 : 1));
    expect(objects).toEqual([
      byPath('/allowed', 'allow', 200),
      byPath('/denied', 'block', 403),
      byPath('/denied-socket', 'block', 403),
      byPath('/unrestricted', 'invalid', 200),
    ]);
  });

  it('reports a WebSocket as one http_request_complete.v0 (101) when it closes', async () => {
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'websocket' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [{ type: 'http_request_complete.v0' }],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const hostname = `live.${DOMAIN}`;
    await bound(hostname);
    const { ws, messages, opened, closed } = await webSocket(hostname, '/live?room=7');
    expect(opened).toBe(true);
    const openedAt = Date.now();
    for (const text of ['first message', 'second, a little longer message']) ws.send(text);
    await eventually(() => (messages.length === 2 ? true : undefined), 'the two echoes');
    expect(messages).toEqual(['first message', 'second, a little longer message']);
    // Held open a while: the event's time span is the connection's, not the handshake's.
    await new Promise((resolve) => setTimeout(resolve, 300));
    ws.close(1000, 'done');
    await closed;
    const tally = tallies.get('/live')!;
    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'websocket');
    const event = await eventually(
      () => fileEvents(dir).find((e) => e.object.http.request.url.path === '/live'),
      'the WebSocket event',
    );
    expect(event).toMatchObject({
      event_type: 'http_request_complete.v0',
      account_id: accountId,
      object: {
        backend: { connection_reused: false },
        conn: { client_ip: '127.0.0.1', server_name: hostname, server_port: service.edgePort },
        ip_policy: { decision: 'invalid' },
        http: {
          request: {
            method: 'get',
            url: { path: '/live', query: 'room=7', scheme: 'http' },
            headers: { Upgrade: ['websocket'] },
            // The frames the client sent (the local server saw the same bytes).
            body_length: tally.received,
          },
          response: {
            status_code: 101,
            headers: { Upgrade: ['websocket'] },
            body_length: tally.sent,
          },
        },
      },
    });
    expect(tally.received).toBeGreaterThan('first message'.length);
    expect(tally.sent).toBeGreaterThan('first message'.length);
    const startedMs = Date.parse(event.object.conn.start_ts);
    const endedMs = Date.parse(event.event_timestamp);
    expect(startedMs).toBeLessThanOrEqual(openedAt);
    expect(endedMs).toBeGreaterThanOrEqual(openedAt + 300);
  });

  it('carries a WebSocket (an Upgrade) both ways', async () => {
    const hostname = `ws.${DOMAIN}`;
    await bound(hostname);
    const socket = connect(service.edgePort!, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString();
    });
    socket.write(
      `GET /chat HTTP/1.1\r\nHost: ${hostname}\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n`,
    );
    await eventually(() => (received.includes('\r\n\r\n') ? true : undefined), 'the 101');
    expect(received).toMatch(/^HTTP\/1\.1 101 /);
    socket.write('ping over the tunnel');
    await eventually(
      () => (received.endsWith('ping over the tunnel') ? true : undefined),
      'the echo',
    );
    socket.destroy();
  });
});
