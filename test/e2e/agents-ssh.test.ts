import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOST_KEY_FILE } from '../../src/agent-plane/sessions/host-key.ts';
import { STOP_REASONS } from '../../src/agent-plane/sessions/session-events.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { Service } from '../../src/service.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';
import {
  curl,
  eventually,
  fileEvents,
  type SshAgent,
  sessionEvents,
  startEchoServer,
  startSshAgent,
} from './agents-helpers.ts';

// Agents connect with the stock OpenSSH client, bind a hostname of their account, and the edge
// carries curl's requests to their local server; sessions and requests become events.

const DOMAIN = 'agents-e2e.example.com';
/** SPEC.md's agent_session_start.v0 / agent_session_stop.v0 table; dots name nested fields. */
const SESSION_FIELDS = [
  'session.id',
  'session.uri',
  'credential.id',
  'credential.uri',
  'agent_ip',
  'ingress_server_ip',
  'region',
  'ingress_hostname',
  'user_agent',
  'metadata',
  'os',
  'arch',
  'transport',
  'started_at',
  'expires_at',
  'stopped_at',
  'deprecated.upcoming_minimum_version',
  'deprecated.upcoming_enforcement_date',
  'deprecated.message',
  'error',
];

/** An object's leaf fields, named with dots. */
function leaves(object: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(object).flatMap(([key, value]) =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? leaves(value as Record<string, unknown>, `${prefix}${key}.`)
      : [`${prefix}${key}`],
  );
}

describe('agents over reverse SSH tunnels, and the edge', () => {
  let store: TestStore;
  let service: Service;
  let api: ApiClient;
  let accountId: string;
  let echo: { server: Server; port: number };
  const agents: SshAgent[] = [];
  const keyDir = mkdtempSync(join(tmpdir(), 'agin-agent-keys-'));

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, { EDGE_RESPONSE_TIMEOUT_MS: '1500' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await api('GET', '/account')).body.id;
    echo = await startEchoServer();
    expect((await api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.server.close();
    await service?.close();
    await store?.cleanup();
    rmSync(keyDir, { recursive: true, force: true });
  });

  async function credential(acl: string[] = []): Promise<{ id: string; token: string }> {
    const created = await api('POST', '/credentials', { acl });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body;
  }

  /** An agent bound to `hostname`, once its session is listed. */
  async function bound(user: string, hostname: string, identity?: string) {
    const agent = startSshAgent(service, { user, hostname, localPort: echo.port, identity });
    agents.push(agent);
    const session = await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      const list = await api('GET', '/tunnel_sessions');
      return list.body.tunnel_sessions.find((s: { metadata: string }) => s.metadata === hostname);
    }, `a session for ${hostname}`);
    return { agent, session };
  }

  it('keeps its host key in DATA_DIR, mode 0600', () => {
    const path = join(store.env.DATA_DIR, HOST_KEY_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, 'utf8')).toContain('OPENSSH PRIVATE KEY');
  });

  it('offers AES ciphers, not ChaCha20-Poly1305 (ssh2 runs it slowly in JavaScript)', async () => {
    /** `ssh -v` up to the key exchange (the unknown token then fails the login): its stderr. */
    const handshake = (...extra: string[]) =>
      promisify(execFile)('ssh', [
        '-v',
        ...extra,
        '-p',
        String(service.sshPort),
        '-F',
        '/dev/null',
        '-o',
        'BatchMode=yes',
        '-o',
        'StrictHostKeyChecking=no',
        '-o',
        'UserKnownHostsFile=/dev/null',
        '-o',
        'PubkeyAuthentication=no',
        'no-such-token@127.0.0.1',
        'true',
      ]).then(
        () => '',
        (error: { stderr: string }) => error.stderr,
      );
    // The client's order picks (OpenSSH 9.2: aes128-ctr with an encrypt-then-MAC HMAC).
    expect(await handshake()).toMatch(/kex: server->client cipher: aes\d+-(ctr|gcm@openssh\.com) /);
    expect(await handshake('-c', 'aes256-gcm@openssh.com')).toContain(
      'kex: server->client cipher: aes256-gcm@openssh.com',
    );
    expect(await handshake('-c', 'chacha20-poly1305@openssh.com')).toContain(
      'no matching cipher found',
    );
  });

  it('binds with an authtoken as the user name; curl reaches the local server; the request is an event', async () => {
    // A file destination subscribed to the traffic events of this host, with two fields kept.
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'edge' } },
    });
    expect(destination.status).toBe(201);
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [
        {
          type: 'http_request_complete.v0',
          filter: `conn.server_name == "app.${DOMAIN}"`,
          fields: ['http.request.url.path', 'http.response.status_code', 'conn.server_name'],
        },
      ],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    await service.pipeline.reload();

    const { token, id: credentialId } = await credential([`bind:*.${DOMAIN}`]);
    const hostname = `app.${DOMAIN}`;
    const { session } = await bound(token, hostname);
    expect(session).toMatchObject({
      credential: { id: credentialId },
      ip: '127.0.0.1',
      transport: 'ssh',
      uri: `${service.url}/tunnel_sessions/${session.id}`,
    });
    expect(session.agent_version).toMatch(/^SSH-2\.0-OpenSSH/);
    expect((await api('GET', `/tunnel_sessions/${session.id}`)).body).toEqual(session);

    const edgePort = service.edgePort!;
    const got = await curl(edgePort, hostname, '/hello?x=1');
    expect(got.status).toBe(200);
    expect(JSON.parse(got.body)).toEqual({
      method: 'GET',
      url: '/hello?x=1',
      host: hostname,
      forwardedFor: '127.0.0.1',
      body: '',
    });
    expect(got.headers.toLowerCase()).toContain('x-echo: yes');
    // A body streams up, and a second request may reuse the pooled channel.
    const posted = await curl(edgePort, hostname, '/upload', [
      '--data-binary',
      'x'.repeat(100_000),
    ]);
    expect(JSON.parse(posted.body).body).toHaveLength(100_000);
    // Another host of no session: the edge's own 502, no event for this account's filter.
    const nobody = await curl(edgePort, `other.${DOMAIN}`, '/');
    expect(nobody.status).toBe(502);
    expect(nobody.body).toContain(`No agent is connected for other.${DOMAIN}`);

    const dir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'edge');
    await eventually(() => (fileEvents(dir).length >= 2 ? true : undefined), 'two events');
    // Requests completing together share Publishes: every one of them is still an event.
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) => curl(edgePort, hostname, `/burst/${i}`)),
    );
    expect(burst.map((answer) => answer.status)).toEqual(Array(20).fill(200));
    const all = await eventually(() => {
      const found = fileEvents(dir);
      return found.length >= 22 ? found : undefined;
    }, "the burst's events");
    expect(all).toHaveLength(22);
    const paths = all.map((event) => event.object.http.request.url.path);
    expect(new Set(paths).size).toBe(22);
    const events = all.filter((event) => !event.object.http.request.url.path.startsWith('/burst/'));
    expect(events).toHaveLength(2);
    // Each request's event is published on its own: their order in the file is not promised.
    events.sort((x, y) =>
      x.object.http.request.url.path < y.object.http.request.url.path ? -1 : 1,
    );
    expect(events[0]).toMatchObject({
      event_type: 'http_request_complete.v0',
      account_id: accountId,
      object: {
        conn: { server_name: hostname },
        http: { request: { url: { path: '/hello' } }, response: { status_code: 200 } },
      },
    });
    // Only the selected fields.
    expect(Object.keys(events[0].object).sort()).toEqual(['conn', 'http']);
    expect(Object.keys(events[0].object.conn)).toEqual(['server_name']);
    expect(events[1].object.http.request.url.path).toBe('/upload');
  });

  it('answers 504 when the agent does not answer in time, and 502 once it is gone', async () => {
    const { token } = await credential();
    const hostname = `slow.${DOMAIN}`;
    const { agent, session } = await bound(token, hostname);
    const slow = await curl(service.edgePort!, hostname, '/slow');
    expect(slow.status).toBe(504);
    await agent.kill();
    await eventually(async () => {
      const events = await sessionEvents(service, accountId);
      return events.find(
        (e) => e.type === 'agent_session_stop.v0' && e.object.session.id === session.id,
      );
    }, 'the stop event');
    expect((await curl(service.edgePort!, hostname, '/')).status).toBe(502);
  });

  it('writes start and stop events with every field; killing the client stops the session', async () => {
    const { token, id: credentialId } = await credential();
    // Under the ingress's eu region domain: the session's region is eu.
    const hostname = `events.eu.${DOMAIN}`;
    const { agent, session } = await bound(token, hostname);
    await agent.kill();
    const events = await eventually(async () => {
      const all = (await sessionEvents(service, accountId)).filter(
        (e) => e.object.session.id === session.id,
      );
      return all.length === 2 ? all : undefined;
    }, 'start and stop events');
    const [start, stop] = events;
    expect(start.type).toBe('agent_session_start.v0');
    expect(stop.type).toBe('agent_session_stop.v0');
    for (const event of events) {
      expect(leaves(event.object).sort()).toEqual([...SESSION_FIELDS].sort());
      expect(event.object).toMatchObject({
        session: { id: session.id, uri: session.uri },
        credential: { id: credentialId, uri: `${service.url}/credentials/${credentialId}` },
        agent_ip: '127.0.0.1',
        ingress_server_ip: '127.0.0.1',
        transport: 'ssh',
        region: 'eu',
        metadata: hostname,
        started_at: session.started_at,
      });
      expect(event.object.user_agent).toMatch(/^SSH-2\.0-OpenSSH/);
    }
    expect(start.object).toMatchObject({ error: '', stopped_at: '' });
    expect(stop.object.error).toBe(STOP_REASONS.clientClosed);
    expect(Date.parse(stop.object.stopped_at)).toBeGreaterThanOrEqual(
      Date.parse(start.object.started_at),
    );
    expect((await api('GET', `/tunnel_sessions/${session.id}`)).status).toBe(404);
  });

  it('refuses a bind the acl does not allow: the client is told why, and the start event has the error', async () => {
    const { token } = await credential([`bind:only.${DOMAIN}`]);
    const agent = startSshAgent(service, {
      user: token,
      hostname: `denied.${DOMAIN}`,
      localPort: echo.port,
    });
    agents.push(agent);
    expect(await agent.exited).not.toBe(0);
    expect(agent.output()).toContain(
      `the credential's acl does not allow binding "denied.${DOMAIN}"`,
    );
    const events = await sessionEvents(service, accountId);
    const refused = events.find((e) => e.object.metadata === `denied.${DOMAIN}`);
    expect(refused).toMatchObject({
      type: 'agent_session_start.v0',
      object: { error: `the credential's acl does not allow binding "denied.${DOMAIN}"` },
    });
  });

  it('refuses a hostname that is not the account’s, and a bad authtoken', async () => {
    const { token } = await credential();
    const foreign = startSshAgent(service, {
      user: token,
      hostname: 'app.not-ours.example',
      localPort: echo.port,
    });
    agents.push(foreign);
    expect(await foreign.exited).not.toBe(0);
    expect(foreign.output()).toContain('is not a domain of this account');
    const wrong = startSshAgent(service, {
      user: 'cr_not_a_token',
      hostname: `x.${DOMAIN}`,
      localPort: echo.port,
    });
    agents.push(wrong);
    expect(await wrong.exited).not.toBe(0);
    expect(wrong.output()).toContain('Permission denied');
  });

  it('allows one live session per hostname: a second bind is refused and the first keeps serving', async () => {
    const { token } = await credential();
    const hostname = `one.${DOMAIN}`;
    const { session } = await bound(token, hostname);
    const second = startSshAgent(service, { user: token, hostname, localPort: echo.port });
    agents.push(second);
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain(`already bound by session ${session.id}`);
    expect((await curl(service.edgePort!, hostname, '/still')).status).toBe(200);
  });

  it('answers a shell (ssh -R without -N) with what the connection serves', async () => {
    const { token } = await credential();
    const hostname = `shell.${DOMAIN}`;
    const agent = startSshAgent(service, {
      user: token,
      hostname,
      localPort: echo.port,
      shell: true,
    });
    agents.push(agent);
    await eventually(
      () =>
        agent.output().includes(`this connection serves http://${hostname}`) ? true : undefined,
      'the shell line',
    );
    expect((await curl(service.edgePort!, hostname, '/via-shell')).status).toBe(200);
    await agent.kill();
  });

  it('ends a session through POST /tunnel_sessions/{id}/stop, with the API key as principal', async () => {
    const { token } = await credential();
    const { agent, session } = await bound(token, `stop.${DOMAIN}`);
    const stopped = await api('POST', `/tunnel_sessions/${session.id}/stop`);
    expect(stopped.status).toBe(204);
    expect(await agent.exited).not.toBe(0);
    expect(agent.output()).toContain('stopped through the API');
    const stop = (await sessionEvents(service, accountId)).find(
      (e) => e.type === 'agent_session_stop.v0' && e.object.session.id === session.id,
    );
    expect(stop.object.error).toBe(STOP_REASONS.api);
    expect(stop.principal).not.toBeNull();
    expect((await api('POST', `/tunnel_sessions/${session.id}/stop`)).status).toBe(404);
  });

  it('ends the sessions of a deleted credential', async () => {
    const { token, id } = await credential();
    const { agent, session } = await bound(token, `deleted.${DOMAIN}`);
    expect((await api('DELETE', `/credentials/${id}`)).status).toBe(204);
    expect(await agent.exited).not.toBe(0);
    const stop = await eventually(
      async () =>
        (await sessionEvents(service, accountId)).find(
          (e) => e.type === 'agent_session_stop.v0' && e.object.session.id === session.id,
        ),
      'the stop event',
    );
    expect(stop.object.error).toBe(STOP_REASONS.credentialDeleted);
  });

  it('binds with a public key registered as an SSH credential', async () => {
    const key = join(keyDir, 'agent_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
    const registered = await api('POST', '/ssh_credentials', {
      public_key: readFileSync(`${key}.pub`, 'utf8'),
      acl: [`bind:key.${DOMAIN}`],
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    const { id } = registered.body;
    const { session } = await bound('agent', `key.${DOMAIN}`, key);
    expect(session.credential).toEqual({ id, uri: `${service.url}/ssh_credentials/${id}` });
    expect((await curl(service.edgePort!, `key.${DOMAIN}`, '/by-key')).status).toBe(200);
    // RSA (rsa-sha2-256/512 signatures) and ECDSA keys too.
    for (const type of ['rsa', 'ecdsa']) {
      const file = join(keyDir, `agent_${type}`);
      execFileSync('ssh-keygen', ['-q', '-t', type, '-N', '', '-f', file]);
      const public_key = readFileSync(`${file}.pub`, 'utf8');
      expect((await api('POST', '/ssh_credentials', { public_key })).status).toBe(201);
      const other = await bound('agent', `${type}.${DOMAIN}`, file);
      await other.agent.kill();
    }
    // Deleting the SSH credential ends its session.
    expect((await api('DELETE', `/ssh_credentials/${id}`)).status).toBe(204);
    const stop = await eventually(
      async () =>
        (await sessionEvents(service, accountId)).find(
          (e) => e.type === 'agent_session_stop.v0' && e.object.session.id === session.id,
        ),
      'the stop event',
    );
    expect(stop.object.error).toBe(STOP_REASONS.credentialDeleted);
    // Another key, not registered: refused.
    const other = join(keyDir, 'other_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', other]);
    const stranger = startSshAgent(service, {
      user: 'agent',
      hostname: `key2.${DOMAIN}`,
      localPort: echo.port,
      identity: other,
    });
    agents.push(stranger);
    expect(await stranger.exited).not.toBe(0);
    expect(stranger.output()).toContain('Permission denied');
  });

  it('applies the account’s enforced IP restrictions: `agent` at login, `endpoints` at the edge', async () => {
    const hostname = `restricted.${DOMAIN}`;
    const { token } = await credential();
    const { session } = await bound(token, hostname);
    const policy = (await api('POST', '/ip_policies', { description: 'no loopback' })).body;
    const rule = await api('POST', '/ip_policy_rules', {
      cidr: '127.0.0.1/32',
      action: 'deny',
      ip_policy_id: policy.id,
    });
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);
    const restrictions: string[] = [];
    try {
      for (const type of ['agent', 'endpoints']) {
        const created = await api('POST', '/ip_restrictions', {
          type,
          enforced: true,
          ip_policy_ids: [policy.id],
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        restrictions.push(created.body.id);
      }
      // The edge refuses the client; the live session stays.
      expect((await curl(service.edgePort!, hostname, '/')).status).toBe(403);
      expect((await api('GET', `/tunnel_sessions/${session.id}`)).status).toBe(200);
      // A new agent is refused at login, told why, and its start event says so.
      const agent = startSshAgent(service, {
        user: token,
        hostname: `other-${hostname}`,
        localPort: echo.port,
      });
      agents.push(agent);
      expect(await agent.exited).not.toBe(0);
      const why = 'agents from 127.0.0.1 are not allowed by an IP restriction';
      expect(agent.output()).toContain(why);
      expect((await sessionEvents(service, accountId)).at(-1)).toMatchObject({
        type: 'agent_session_start.v0',
        object: { error: why },
      });
    } finally {
      for (const id of restrictions) await api('DELETE', `/ip_restrictions/${id}`);
    }
    expect((await curl(service.edgePort!, hostname, '/')).status).toBe(200);
  });

  it('keeps tunnel sessions to their account', async () => {
    const live = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    expect(live.length).toBeGreaterThan(0);
    const { createAccount } = await import('../../src/store/accounts.ts');
    const { mintApiKey } = await import('../../src/control-plane/api/api-keys/mint.ts');
    const other = await createAccount(service.db);
    const key = await mintApiKey(service.db, { accountId: other }, null, service.url);
    const b = apiClient(service.url, key.token!);
    expect((await b('GET', '/tunnel_sessions')).body.tunnel_sessions).toEqual([]);
    for (const session of live) {
      expect((await b('GET', `/tunnel_sessions/${session.id}`)).status).toBe(404);
      expect((await b('POST', `/tunnel_sessions/${session.id}/stop`)).status).toBe(404);
    }
    expect((await api('GET', '/tunnel_sessions')).body.tunnel_sessions).toEqual(live);
  });
});
