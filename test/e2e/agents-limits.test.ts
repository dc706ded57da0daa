import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import { curl, eventually, type SshAgent, startSshAgent } from './agents-helpers.ts';

// The bounds: live sessions per account (MAX_SESSIONS_PER_ACCOUNT) and requests in flight per
// session (MAX_CHANNELS_PER_SESSION, the edge's 503).

const DOMAIN = 'agents-limits.example.com';

describe('agents: limits', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let local: Server;
  let localPort: number;
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, {
      MAX_SESSIONS_PER_ACCOUNT: '1',
      MAX_CHANNELS_PER_SESSION: '1',
    });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    await api('POST', '/agent_ingresses', { domain: DOMAIN });
    // Answers /slow after a second, anything else at once.
    local = createServer((request, response) => {
      if (request.url === '/slow') setTimeout(() => response.end('slow'), 1000);
      else response.end('fast');
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

  it('refuses a session beyond MAX_SESSIONS_PER_ACCOUNT and a request beyond MAX_CHANNELS_PER_SESSION', async () => {
    const { token } = (await api('POST', '/credentials', {})).body;
    const hostname = `one.${DOMAIN}`;
    const first = startSshAgent(service, { user: token, hostname, localPort });
    agents.push(first);
    await eventually(async () => {
      if (first.child.exitCode !== null) throw new Error(`ssh exited: ${first.output()}`);
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.length === 1 ? list : undefined;
    }, 'the first session');
    const second = startSshAgent(service, { user: token, hostname: `two.${DOMAIN}`, localPort });
    agents.push(second);
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain('the account already has 1 live sessions');

    // One request in flight holds the session's one channel: a second one at once is a 503.
    const slow = curl(service.edgePort!, hostname, '/slow');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const busy = await curl(service.edgePort!, hostname, '/fast');
    expect(busy.status).toBe(503);
    expect(busy.body).toContain('too many requests open');
    expect((await slow).body).toBe('slow');
    // Once it is answered, the channel is free again (or reused from the pool).
    expect((await curl(service.edgePort!, hostname, '/fast')).body).toBe('fast');
  });
});
