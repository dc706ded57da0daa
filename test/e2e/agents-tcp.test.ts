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
});
