import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { accountEventsDir } from '../../src/sinks/file/layout.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { curl, eventually, fileEvents, type SshAgent, startSshAgent } from './agents-helpers.ts';

// The edge's `endpoints` IP restriction decision in its traffic events, and WebSockets through
// the edge.

const DOMAIN = 'agents-policy.example.com';

describe('the edge: IP restriction decisions in events, and WebSockets', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let accountId: string;
  let local: Server;
  let localPort: number;
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    expect((await api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    // The agent's local service: plain answers, and an echo protocol after an Upgrade.
    local = createServer((_request, response) => response.end('plain'));
    local.on('upgrade', (request, socket) => {
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

  it('answers 403 to a client an `endpoints` IP restriction blocks, and says so in the event', async () => {
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'policy' } },
    });
    await api('POST', '/event_subscriptions', {
      sources: [
        {
          type: 'http_request_complete.v0',
          fields: ['ip_policy.decision', 'http.response.status_code'],
        },
      ],
      destination_ids: [destination.body.id],
    });
    await service.pipeline.reload();
    const hostname = `web.${DOMAIN}`;
    await bound(hostname);
    expect((await curl(service.edgePort!, hostname, '/')).body).toBe('plain');
    const policy = (await api('POST', '/ip_policies', {})).body;
    await api('POST', '/ip_policy_rules', {
      cidr: '127.0.0.0/8',
      action: 'deny',
      ip_policy_id: policy.id,
    });
    const restriction = await api('POST', '/ip_restrictions', {
      type: 'endpoints',
      enforced: true,
      ip_policy_ids: [policy.id],
    });
    expect(restriction.status).toBe(201);
    const refused = await curl(service.edgePort!, hostname, '/');
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('not allowed by an IP restriction');
    await api('DELETE', `/ip_restrictions/${restriction.body.id}`);
    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'policy');
    const events = await eventually(() => {
      const found = fileEvents(dir);
      return found.length >= 2 ? found : undefined;
    }, 'two traffic events');
    const objects = events.map((e) => e.object);
    objects.sort((x, y) => x.http.response.status_code - y.http.response.status_code);
    expect(objects).toEqual([
      { ip_policy: { decision: 'allow' }, http: { response: { status_code: 200 } } },
      { ip_policy: { decision: 'block' }, http: { response: { status_code: 403 } } },
    ]);
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
