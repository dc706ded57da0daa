import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRelayAuth, RELAY_HEADER } from '../../src/agent-plane/edge/relay-auth.ts';
import { STOP_REASONS } from '../../src/agent-plane/sessions/session-events.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import { createKeyring } from '../../src/shared/secrets.ts';
import { freePort } from '../helpers/free-port.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import { postgresStore, type TestStore } from '../helpers/stores.ts';
import {
  curl,
  eventually,
  fileEvents,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from './agents-helpers.ts';

// Two service processes on one PostgreSQL database: an agent's session lives on the instance it
// reached (A); the other (B) lists it, relays its hostname's requests to A over INTERNAL_URL,
// stops it, refuses a second bind of its hostname, and answers 502 once it is gone.

const DOMAIN = 'instances-e2e.example.com';
// Renewed every third of it: long enough for a busy machine, short enough to watch one lapse.
const LEASE_MS = 4_000;

/** Ports and settings of one instance. */
async function instanceEnv(store: TestStore, secretsKey: string) {
  const ports = { ssh: await freePort(), edge: await freePort(), internal: await freePort() };
  const env = {
    DATABASE_URL: store.env.DATABASE_URL!,
    SECRETS_KEY: secretsKey,
    SSH_PORT: String(ports.ssh),
    EDGE_HTTP_PORT: String(ports.edge),
    EDGE_HTTPS_PORT: 'off',
    INTERNAL_URL: `http://127.0.0.1:${ports.internal}`,
    SESSION_LEASE_MS: String(LEASE_MS),
  };
  return { ports, env };
}

/** Bytes over a bare socket: an Upgrade to the `echo` protocol, then a message echoed back. */
async function upgradeEcho(edgePort: number, host: string, message: string): Promise<string> {
  const socket = connect(edgePort, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('utf8');
  });
  socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n`);
  try {
    await eventually(() => (received.includes('\r\n\r\n') ? true : undefined), 'the 101');
    expect(received.split('\r\n')[0]).toBe('HTTP/1.1 101 Switching Protocols');
    const head = received.length;
    socket.write(message);
    await eventually(() => (received.length >= head + message.length ? true : undefined), 'echo');
    return received.slice(head);
  } finally {
    socket.destroy();
  }
}

describe('several instances on one PostgreSQL store', () => {
  let store: TestStore;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let portsA: { ssh: number; edge: number; internal: number };
  let portsB: { ssh: number; edge: number; internal: number };
  let accountId: string;
  let echo: { server: Server; port: number };
  const agents: SshAgent[] = [];
  const dirs: string[] = [];
  const secretsKey = randomBytes(32).toString('base64');

  beforeAll(async () => {
    store = await postgresStore();
    const envA = await instanceEnv(store, secretsKey);
    const envB = await instanceEnv(store, secretsKey);
    portsA = envA.ports;
    portsB = envB.ports;
    dirs.push(
      mkdtempSync(join(tmpdir(), 'agin-inst-a-')),
      mkdtempSync(join(tmpdir(), 'agin-inst-b-')),
    );
    // A first: it makes the store and the first key; B starts on it (the same key works on both).
    a = await startServiceProcess({ dataDir: dirs[0], env: envA.env });
    accountId = (await a.api('GET', '/account')).body.id;
    expect((await a.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    // Every request's event goes to a file destination; B starts with it in its routing too, so
    // an event B emitted would be seen under B's DATA_DIR.
    const destination = await a.api('POST', '/event_destinations', {
      target: { file: { path: 'edge' } },
    });
    expect(destination.status).toBe(201);
    const subscription = await a.api('POST', '/event_subscriptions', {
      sources: [{ type: 'http_request_complete.v0' }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    b = await startServiceProcess({ dataDir: dirs[1], env: envB.env });
    echo = await startEchoServer();
    // The agent's local server also speaks a trivial upgraded protocol: it echoes bytes.
    echo.server.on('upgrade', (_request, socket) => {
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n',
      );
      socket.pipe(socket);
    });
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.server.close();
    await b?.stop();
    await a?.stop();
    await store?.cleanup();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A credential's authtoken, made through `instance`. */
  async function token(instance = a): Promise<string> {
    return (await credential(instance)).token;
  }

  async function credential(instance: ServiceProcess): Promise<{ id: string; token: string }> {
    const created = await instance.api('POST', '/credentials', {});
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body;
  }

  /** An agent on the instance at `sshPort` bound to `hostname`, once `lister` lists it. */
  async function bound(sshPort: number, hostname: string, lister: ServiceProcess) {
    const agent = startSshAgent(
      { sshPort },
      { user: await token(lister), hostname, localPort: echo.port },
    );
    agents.push(agent);
    const session = await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = await lister.api('GET', '/tunnel_sessions');
      return list.body.tunnel_sessions.find((s: { metadata: string }) => s.metadata === hostname);
    }, `a session for ${hostname}`);
    return { agent, session };
  }

  /** The store id of the instance serving `hostname`. */
  async function ownerIdOf(hostname: string): Promise<string> {
    const client = new pg.Client({ connectionString: store.env.DATABASE_URL });
    await client.connect();
    try {
      const found = await client.query<{ owner_id: string }>(
        'SELECT owner_id FROM agent_sessions WHERE endpoint = $1',
        [hostname],
      );
      return found.rows[0].owner_id;
    } finally {
      await client.end();
    }
  }

  /** The http_request_complete.v0 events of `path` an instance's file destination holds. */
  const eventsOf = (dataDir: string, path: string) =>
    fileEvents(join(accountEventsDir(dataDir, accountId), 'edge')).filter(
      (event) => event.object.http.request.url.path === path,
    );

  it('relays B’s edge requests to the agent on A, both ways; A emits the one event', async () => {
    const hostname = `app.${DOMAIN}`;
    const { session } = await bound(portsA.ssh, hostname, a);
    // B lists and gets the session A holds.
    const listed = await b.api('GET', '/tunnel_sessions');
    expect(listed.body.tunnel_sessions.map((s: { id: string }) => s.id)).toContain(session.id);
    const got = await b.api('GET', `/tunnel_sessions/${session.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: session.id, metadata: hostname, transport: 'ssh' });

    const answer = await curl(portsB.edge, hostname, '/through-b?x=1');
    expect(answer.status).toBe(200);
    expect(answer.headers.toLowerCase()).toContain('x-echo: yes');
    expect(JSON.parse(answer.body)).toEqual({
      method: 'GET',
      url: '/through-b?x=1',
      host: hostname,
      // The client's address as B saw it, not B's as A saw it; no relay header reaches the agent.
      forwardedFor: '127.0.0.1',
      body: '',
    });
    const posted = await curl(portsB.edge, hostname, '/upload', [
      '--data-binary',
      'y'.repeat(100_000),
    ]);
    expect(JSON.parse(posted.body).body).toBe('y'.repeat(100_000));

    const [event] = await eventually(() => {
      const found = eventsOf(dirs[0], '/through-b');
      return found.length > 0 ? found : undefined;
    }, "the owner's event");
    expect(event.object).toMatchObject({
      conn: { server_name: hostname, server_port: portsB.edge, client_ip: '127.0.0.1' },
      http: { response: { status_code: 200 } },
    });
    await eventually(() => (eventsOf(dirs[0], '/upload').length > 0 ? true : undefined), 'upload');
    // Once each: A's file has each request once, B's none (B routes the same subscription).
    await sleep(1_000);
    expect(eventsOf(dirs[0], '/through-b')).toHaveLength(1);
    expect(eventsOf(dirs[0], '/upload')).toHaveLength(1);
    expect(eventsOf(dirs[1], '/through-b')).toHaveLength(0);
    expect(eventsOf(dirs[1], '/upload')).toHaveLength(0);
  });

  it('relays a request whose hop-by-hop fields name trailers, and B goes on serving', async () => {
    const hostname = `hops.${DOMAIN}`;
    await bound(portsA.ssh, hostname, a);
    // Node's http client throws on a Trailer field without a chunked body: a relay that passed
    // it on took its whole process down.
    const extra = ['-H', 'Trailer: X-Checksum', '-H', 'TE: trailers', '-H', 'Keep-Alive: 5'];
    const answer = await curl(portsB.edge, hostname, '/hops', extra);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ url: '/hops', host: hostname });
    expect(b.running()).toBe(true);
    expect((await curl(portsB.edge, hostname, '/after-hops')).status).toBe(200);
  });

  it('relays an Upgrade (WebSocket-style) through B to the agent on A', async () => {
    const hostname = `ws.${DOMAIN}`;
    await bound(portsA.ssh, hostname, b);
    expect(await upgradeEcho(portsB.edge, hostname, 'ping through the relay')).toBe(
      'ping through the relay',
    );
  });

  it('refuses a second bind of the hostname on B while A holds it, and takes it once freed', async () => {
    const hostname = `held.${DOMAIN}`;
    const { agent: first, session } = await bound(portsA.ssh, hostname, a);
    const second = startSshAgent(
      { sshPort: portsB.ssh },
      { user: await token(), hostname, localPort: echo.port },
    );
    agents.push(second);
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain(`already bound by session ${session.id}`);
    expect((await curl(portsB.edge, hostname, '/still')).status).toBe(200);
    // Once its agent leaves, the hostname is free on every instance.
    await first.kill();
    await eventually(async () => {
      const gone = await curl(portsB.edge, hostname, '/left');
      return gone.status === 502 && gone.body.includes(`No agent is connected for ${hostname}`)
        ? true
        : undefined;
    }, 'the 502 after the agent left');
    await bound(portsB.ssh, hostname, a);
    expect((await curl(portsA.edge, hostname, '/now-on-b')).status).toBe(200);
  });

  it('serves at INTERNAL_URL only requests another instance signed', async () => {
    const hostname = `app.${DOMAIN}`;
    const internal = `http://127.0.0.1:${portsA.internal}`;
    const unsigned = await curl(portsA.internal, hostname, '/direct');
    expect(unsigned.status).toBe(403);
    expect(unsigned.body).toContain('only requests relayed by instances');
    const forged = await curl(portsA.internal, hostname, '/forged', [
      '-H',
      `${RELAY_HEADER}: e30.${Buffer.alloc(32).toString('base64url')}`,
    ]);
    expect(forged.status).toBe(403);
    const stop = await fetch(`${internal}/relay/stop`, { method: 'POST' });
    expect(stop.status).toBe(403);
    // A header an instance signed passes once, for the request and the instance it was signed
    // for, and no other.
    const auth = createRelayAuth(createKeyring(Buffer.from(secretsKey, 'base64')));
    const owner = await ownerIdOf(hostname);
    const peer = {
      conn: {
        clientIp: '192.0.2.7',
        serverIp: '127.0.0.1',
        serverName: hostname,
        serverPort: 1,
        startMs: Date.now(),
      },
      tls: undefined,
    };
    const sign = (to: string, target: string, length: string | null = null) =>
      `${RELAY_HEADER}: ${auth.sign(to, { kind: 'edge', peer, method: length === null ? 'GET' : 'POST', target, host: hostname, length })}`;
    const header = sign(owner, '/signed');
    const signed = await curl(portsA.internal, hostname, '/signed', ['-H', header]);
    expect(signed.status).toBe(200);
    expect(JSON.parse(signed.body)).toMatchObject({ url: '/signed', forwardedFor: '192.0.2.7' });
    // The same header again (a replay), for another path, or signed for another instance.
    expect((await curl(portsA.internal, hostname, '/signed', ['-H', header])).status).toBe(403);
    const elsewhere = sign(owner, '/elsewhere');
    expect((await curl(portsA.internal, hostname, '/other', ['-H', elsewhere])).status).toBe(403);
    const forB = sign('inst_b', '/for-b');
    expect((await curl(portsA.internal, hostname, '/for-b', ['-H', forB])).status).toBe(403);
    // A body of the length signed passes; one of another length does not.
    const upload = (header: string, body: string) =>
      curl(portsA.internal, hostname, '/upload', ['-H', header, '--data-binary', body]);
    const posted = await upload(sign(owner, '/upload', '5'), 'hello');
    expect(JSON.parse(posted.body)).toMatchObject({ method: 'POST', body: 'hello' });
    expect((await upload(sign(owner, '/upload', '5'), 'hello, world')).status).toBe(403);
  });

  it('stops a session of A from B; B then answers 502 for its hostname', async () => {
    const hostname = `stop.${DOMAIN}`;
    const { agent, session } = await bound(portsA.ssh, hostname, b);
    expect((await curl(portsB.edge, hostname, '/before')).status).toBe(200);
    const stopped = await b.api('POST', `/tunnel_sessions/${session.id}/stop`);
    expect(stopped.status).toBe(204);
    expect(await agent.exited).not.toBe(0);
    expect(agent.output()).toContain(STOP_REASONS.api);
    expect((await b.api('GET', `/tunnel_sessions/${session.id}`)).status).toBe(404);
    expect((await b.api('POST', `/tunnel_sessions/${session.id}/stop`)).status).toBe(404);
    const gone = await curl(portsB.edge, hostname, '/after');
    expect(gone.status).toBe(502);
    expect(gone.body).toContain(`No agent is connected for ${hostname}`);
  });

  it('ends a session on A whose credential is deleted through B', async () => {
    const hostname = `revoked.${DOMAIN}`;
    const { id, token: user } = await credential(b);
    const agent = startSshAgent({ sshPort: portsA.ssh }, { user, hostname, localPort: echo.port });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      return (await curl(portsB.edge, hostname, '/ok')).status === 200 ? true : undefined;
    }, 'the session through B');
    expect((await b.api('DELETE', `/credentials/${id}`)).status).toBe(204);
    // A sees it at its next lease renewal (every third of SESSION_LEASE_MS).
    expect(await agent.exited).not.toBe(0);
    expect(agent.output()).toContain(STOP_REASONS.credentialDeleted);
  });

  it('forgets the sessions of a crashed instance once their lease lapses', async () => {
    const hostname = `crash.${DOMAIN}`;
    const { agent } = await bound(portsA.ssh, hostname, b);
    await a.stop('SIGKILL');
    await agent.exited;
    // Its row still counts for a while: B cannot reach its owner.
    const unreachable = await curl(portsB.edge, hostname, '/owner-gone');
    expect(unreachable.status).toBe(502);
    expect(unreachable.body).toContain('connected to another instance, which cannot be reached');
    // Then it lapses: B lists it no more, answers its own 502, and takes a bind of the hostname.
    await eventually(
      async () => {
        const list = await b.api('GET', '/tunnel_sessions');
        const held = list.body.tunnel_sessions.some(
          (s: { metadata: string }) => s.metadata === hostname,
        );
        return held ? undefined : true;
      },
      'the lease to lapse',
      LEASE_MS * 5,
    );
    const gone = await curl(portsB.edge, hostname, '/lapsed');
    expect(gone.status).toBe(502);
    expect(gone.body).toContain(`No agent is connected for ${hostname}`);
    await bound(portsB.ssh, hostname, b);
    expect((await curl(portsB.edge, hostname, '/on-b')).status).toBe(200);
  });
});
