import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as connectTls } from 'node:tls';
import dnsPacket from 'dns-packet';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SshAgent, startSshAgent } from '../e2e/agents-helpers.ts';
import { until } from '../faults/support.ts';
import { dig } from '../helpers/dig.ts';
import { expectRawError } from '../helpers/expect-error.ts';
import { freePort } from '../helpers/free-port.ts';
import { metric, openSsh, runSsh } from '../helpers/listener-probes.ts';
import { openRaw, requestHead } from '../helpers/raw-http.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';

// MAX_CONNECTIONS on every listener, the DNS/TCP timeouts and the open-file limit, against the
// service as a process with floods of real sockets: each refusal as its protocol allows it (HTTP
// 503, an SSH disconnect ssh prints, a closed TCP or DNS connection), counted in /metrics, and
// a legitimate client served meanwhile or once a place is free again.

const MAX_CONNECTIONS = 20;
const DNS_IDLE_MS = 2000;
const DNS_TIMEOUT_MS = 4000;
// Timers and a shared machine: how late a cut may come.
const SLACK_MS = 1500;
const DOMAIN = 'listener-limits.example.com';
const REFUSED = 'agent_ingress_listener_connections_refused_total';
const CLOSED = 'agent_ingress_listener_connections_closed_total';

/** The ports a service process prints on stderr. */
function portsOf(service: ServiceProcess): { ssh: number; http: number; https: number } {
  const [, ssh, http, https] = /SSH on port (\d+); .* HTTP on port (\d+), HTTPS on port (\d+)/
    .exec(service.stderr())!
    .map(Number);
  return { ssh, http, https };
}

/** A plain TCP connection, open once connected; `closed` resolves with Date.now() at its close. */
async function openTcp(port: number, open: Socket[]) {
  const socket = connect(port, '127.0.0.1');
  open.push(socket);
  socket.on('error', () => {});
  let received = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
  });
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('close', reject));
  return { socket, closed, received: () => received };
}

/** When `closed` resolved, or Infinity if not within `ms`. */
function closedWithin(closed: Promise<number>, ms: number): Promise<number> {
  return Promise.race([closed, sleep(ms).then(() => Number.POSITIVE_INFINITY)]);
}

/** A DNS/TCP query for the SOA of DOMAIN, length-prefixed. */
function soaQuery(id: number): Buffer {
  return dnsPacket.streamEncode({ type: 'query', id, questions: [{ type: 'SOA', name: DOMAIN }] });
}

/** The DNS messages in what a TCP connection received (each length-prefixed). */
function dnsMessages(bytes: Buffer): dnsPacket.Packet[] {
  const messages = [];
  for (let at = 0; at + 2 <= bytes.length; at += 2 + bytes.readUInt16BE(at)) {
    messages.push(dnsPacket.decode(bytes.subarray(at + 2, at + 2 + bytes.readUInt16BE(at))));
  }
  return messages;
}

describe('MAX_CONNECTIONS on every listener, and the DNS/TCP timeouts', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-listener-limits-'));
  let service: ServiceProcess;
  let ports: ReturnType<typeof portsOf>;
  let dnsPort: number;
  let tcpPort: number;
  let token: string;
  let echo: Server;
  const open: Socket[] = [];
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    [dnsPort, tcpPort] = [await freePort(), await freePort()];
    service = await startServiceProcess({
      dataDir,
      env: {
        MAX_CONNECTIONS: String(MAX_CONNECTIONS),
        // No early refusal of unauthenticated SSH connections: MAX_CONNECTIONS is what refuses.
        SSH_MAX_STARTUPS: '100',
        DNS_PORT: String(dnsPort),
        DNS_TCP_IDLE_TIMEOUT_MS: String(DNS_IDLE_MS),
        DNS_TCP_TIMEOUT_MS: String(DNS_TIMEOUT_MS),
        TCP_ADDR_PORTS: `${tcpPort}-${tcpPort}`,
      },
    });
    ports = portsOf(service);
    await service.api('POST', '/agent_ingresses', { domain: DOMAIN });
    token = (await service.api('POST', '/credentials', {})).body.token;
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  });
  afterEach(() => {
    for (const socket of open.splice(0)) socket.destroy();
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.close();
    if (service?.running()) await service.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** `count` connections to `port` held open at once. */
  const hold = (port: number, count: number) =>
    Promise.all(Array.from({ length: count }, () => openTcp(port, open)));

  it('SSH: refuses a connection beyond MAX_CONNECTIONS with a reason ssh prints; an agent gets in once one closes', async () => {
    const held = await Promise.all(
      Array.from({ length: MAX_CONNECTIONS }, () => openSsh(ports.ssh, open)),
    );
    expect(held.filter((conn) => conn.disconnect !== undefined)).toEqual([]);
    const stock = await runSsh(ports.ssh, token);
    expect(stock.code).toBe(255);
    expect(stock.output).toMatch(
      /Received disconnect from 127\.0\.0\.1 port \d+:12: too many connections: this listener holds 20 \(MAX_CONNECTIONS\); retry shortly/,
    );
    expect(
      await metric(service.url, REFUSED, '{listener="ssh",limit="max_connections"}'),
    ).toBeGreaterThanOrEqual(1);
    held[0].socket.destroy();
    // Started again if refused for a moment: the service has yet to see the place freed.
    for (let tries = 1; ; tries++) {
      const agent = startSshAgent(
        { sshPort: ports.ssh },
        { user: token, hostname: `app.${DOMAIN}`, localPort: 1 },
      );
      agents.push(agent);
      const sessions = async () =>
        (await service.api('GET', '/tunnel_sessions')).body.tunnel_sessions.length;
      await until(
        'the agent session, or ssh gone',
        async () => agent.child.exitCode !== null || (await sessions()) === 1,
        15_000,
        100,
      );
      if (agent.child.exitCode === null) break;
      expect(agent.output()).toMatch(/retry shortly/);
      expect(tries).toBeLessThan(10);
    }
    await agents.at(-1)!.kill();
  });

  it('edge HTTP: answers 503 ERR_TOO_MANY_CONNECTIONS beyond MAX_CONNECTIONS while the API serves; serves again once one closes', async () => {
    const edgeUrl = `http://127.0.0.1:${ports.http}`;
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => openRaw(edgeUrl)));
    open.push(...held.map((conn) => conn.socket));
    const extra = await openRaw(edgeUrl);
    extra.send(requestHead('GET', '/', { host: `app.${DOMAIN}` }));
    const refused = await extra.response();
    expectRawError(refused, 503, 'ERR_TOO_MANY_CONNECTIONS');
    expect(refused.headers.connection).toBe('close');
    await extra.closed;
    expect((await service.api('GET', '/healthz')).status).toBe(200);
    expect(
      await metric(service.url, REFUSED, '{listener="edge_http",limit="max_connections"}'),
    ).toBeGreaterThanOrEqual(1);
    held[0].destroy();
    // Served by the edge: no agent serves the name (502), which only the edge answers.
    await until(
      'the edge answering once a connection closed',
      async () => {
        const conn = await openRaw(edgeUrl);
        open.push(conn.socket);
        conn.send(requestHead('GET', '/', { host: `app.${DOMAIN}` }));
        return (await conn.response()).status === 502;
      },
      5000,
      100,
    );
  });

  it('edge HTTPS: closes a connection beyond MAX_CONNECTIONS before any TLS; handshakes again once one closes', async () => {
    const held = await hold(ports.https, MAX_CONNECTIONS);
    /** The error a TLS client meets (no certificate covers this name: an alert when served). */
    const handshake = () =>
      new Promise<string>((resolve) => {
        const tls = connectTls({
          port: ports.https,
          host: '127.0.0.1',
          servername: `nothing.${DOMAIN}`,
          rejectUnauthorized: false,
        });
        tls.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
        tls.once('secureConnect', () => resolve('connected'));
      });
    expect(await handshake()).toBe('ECONNRESET');
    expect(
      await metric(service.url, REFUSED, '{listener="edge_https",limit="max_connections"}'),
    ).toBeGreaterThanOrEqual(1);
    held[0].socket.destroy();
    await until(
      'a TLS handshake answered once a connection closed',
      async () => /ALERT_HANDSHAKE_FAILURE/.test(await handshake()),
      5000,
      100,
    );
  });

  it('TCP endpoint: closes a connection beyond MAX_CONNECTIONS at once; carries one again once another closes', async () => {
    const reserved = await service.api('POST', '/reserved_addrs', {});
    expect(reserved.status).toBe(201);
    const echoPort = (echo.address() as { port: number }).port;
    const agent = startSshAgent(
      { sshPort: ports.ssh },
      { user: token, hostname: '', remote: String(tcpPort), localPort: echoPort },
    );
    agents.push(agent);
    /** A connection through the endpoint that echoes `text`, held open; rejects if closed. */
    const echoed = async (text: string) => {
      const conn = await openTcp(tcpPort, open);
      conn.socket.write(text);
      const echoes = () => conn.received().toString() === text;
      await until('the echo or a close', () => echoes() || conn.socket.destroyed, 5000, 20);
      if (!echoes()) throw new Error('closed without the echo');
      return conn;
    };
    const first = await until(
      'the TCP endpoint',
      () => echoed('first').catch(() => undefined),
      15_000,
    );
    const held = [first];
    for (let i = 1; i < MAX_CONNECTIONS; i++) held.push(await echoed(`held ${i}`));
    const extra = await openTcp(tcpPort, open);
    extra.socket.write('beyond');
    expect(await closedWithin(extra.closed, SLACK_MS)).toBeLessThan(Number.POSITIVE_INFINITY);
    expect(extra.received().length).toBe(0);
    expect(
      await metric(service.url, REFUSED, '{listener="tcp",limit="max_connections"}'),
    ).toBeGreaterThanOrEqual(1);
    held[0].socket.destroy();
    await until(
      'a connection carried once one closed',
      () => echoed('again').catch(() => false),
      5000,
    );
    await agent.kill();
  });

  it('DNS over TCP: closes a connection beyond MAX_CONNECTIONS while UDP answers; TCP answers again once they go', async () => {
    const held = await hold(dnsPort, MAX_CONNECTIONS);
    const extra = await openTcp(dnsPort, open);
    extra.socket.write(soaQuery(1));
    expect(await closedWithin(extra.closed, SLACK_MS)).toBeLessThan(Number.POSITIVE_INFINITY);
    expect(extra.received().length).toBe(0);
    expect((await dig(dnsPort, DOMAIN, 'SOA')).status).toBe('NOERROR');
    expect(
      await metric(service.url, REFUSED, '{listener="dns_tcp",limit="max_connections"}'),
    ).toBeGreaterThanOrEqual(1);
    // Idle, the held connections go at DNS_TCP_IDLE_TIMEOUT_MS.
    await Promise.all(held.map((conn) => conn.closed));
    await until(
      'an answer over TCP',
      async () => (await dig(dnsPort, DOMAIN, 'SOA', 'tcp')).status === 'NOERROR',
      5000,
      100,
    );
  });

  it('DNS over TCP: closes a connection with no whole query at DNS_TCP_IDLE_TIMEOUT_MS, however it trickles bytes', async () => {
    const started = Date.now();
    const conn = await openTcp(dnsPort, open);
    // A query's length, then a byte every 300 ms of a query that never completes.
    conn.socket.write(Buffer.from([0, 200]));
    const trickle = setInterval(() => conn.socket.write(Buffer.from([0])), 300);
    const closedAt = await closedWithin(conn.closed, DNS_IDLE_MS + SLACK_MS);
    clearInterval(trickle);
    expect(closedAt - started).toBeGreaterThanOrEqual(DNS_IDLE_MS - 100);
    expect(closedAt - started).toBeLessThan(DNS_IDLE_MS + SLACK_MS);
    expect(
      await metric(service.url, CLOSED, '{listener="dns_tcp",limit="idle_timeout"}'),
    ).toBeGreaterThanOrEqual(1);
  });

  it('DNS over TCP: closes a busy connection at DNS_TCP_TIMEOUT_MS, having answered its queries until then', async () => {
    const started = Date.now();
    const conn = await openTcp(dnsPort, open);
    let id = 0;
    const ask = setInterval(() => conn.socket.write(soaQuery(++id)), 500);
    const closedAt = await closedWithin(conn.closed, DNS_TIMEOUT_MS + SLACK_MS);
    clearInterval(ask);
    expect(closedAt - started).toBeGreaterThanOrEqual(DNS_TIMEOUT_MS - 100);
    expect(closedAt - started).toBeLessThan(DNS_TIMEOUT_MS + SLACK_MS);
    const answers = dnsMessages(conn.received());
    expect(answers.length).toBeGreaterThanOrEqual(DNS_TIMEOUT_MS / 500 - 2);
    expect(answers.every((answer) => answer.answers?.[0]?.type === 'SOA')).toBe(true);
    expect(await metric(service.url, CLOSED, '{listener="dns_tcp",limit="timeout"}')).toBe(1);
  });
});

describe('the open-file limit', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-open-files-'));
  const OPEN_FILES = 1024;
  const FLOOD = 1100;
  let service: ServiceProcess;
  let ports: ReturnType<typeof portsOf>;
  let dnsPort: number;
  const open: Socket[] = [];

  beforeAll(async () => {
    dnsPort = await freePort();
    service = await startServiceProcess({
      dataDir,
      openFiles: OPEN_FILES,
      env: { DNS_PORT: String(dnsPort) },
    });
    ports = portsOf(service);
    await service.api('POST', '/agent_ingresses', { domain: DOMAIN });
  });
  afterAll(async () => {
    for (const socket of open) socket.destroy();
    if (service?.running()) await service.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Opens `count` connections to `port`, 100 at a time; those the service refused close. */
  async function flood(port: number, count: number): Promise<Socket[]> {
    const sockets: Socket[] = [];
    for (let at = 0; at < count; at += 100) {
      const batch = Array.from({ length: Math.min(100, count - at) }, () => {
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => {});
        socket.resume(); // what the service says is dropped: its close is what counts
        open.push(socket);
        sockets.push(socket);
        return new Promise((resolve) => socket.once('connect', resolve).once('close', resolve));
      });
      await Promise.all(batch);
    }
    return sockets;
  }

  it(`at ulimit -n ${OPEN_FILES}, sizes each listener's cap to half what the limit leaves, warns, and keeps every port accepting while ${FLOOD} connections flood the SSH port and ${FLOOD} the edge`, async () => {
    const held = (sockets: Socket[]) => sockets.filter((socket) => !socket.destroyed).length;
    const ssh = await flood(ports.ssh, FLOOD);
    // SSH_MAX_STARTUPS (100 by default) refuses silent connections before MAX_CONNECTIONS does;
    // the refused ones read their disconnect and close.
    await until('refused SSH connections closed', () => held(ssh) === 100, 10_000, 100);
    const edge = await flood(ports.http, FLOOD);

    // Every listener still accepts: SSH, the API, DNS over TCP, the edge's HTTPS. SSH first,
    // while the edge's refused connections linger (silent: each waits up to a second for a
    // request to answer 503): they take at most half the places a refusal's answer needs.
    const login = await openSsh(ports.ssh, open).catch(() => undefined);
    expect(login?.disconnect?.reason).toMatch(/SSH_MAX_STARTUPS/);
    const api = await openRaw(service.url);
    open.push(api.socket);
    api.send(requestHead('GET', '/healthz'));
    expect((await api.response()).status).toBe(200);
    expect((await dig(dnsPort, DOMAIN, 'SOA', 'tcp')).status).toBe('NOERROR');
    const https = await openTcp(ports.https, open);
    expect(await closedWithin(https.closed, 500)).toBe(Number.POSITIVE_INFINITY);

    // 1024 less 256 kept for the process and 64 for refusals being answered, halved.
    const perListener = (OPEN_FILES - 256 - 64) / 2;
    await until('refused edge connections closed', () => held(edge) === perListener, 10_000, 100);
    expect(held(ssh)).toBe(100);
    expect(
      await metric(service.url, REFUSED, '{listener="edge_http",limit="max_connections"}'),
    ).toBe(FLOOD - perListener);
    expect(await metric(service.url, REFUSED, '{listener="ssh",limit="max_startups"}')).toBe(
      FLOOD - 100 + 1,
    );
    const warning = service.logs().find((line) => /open-file limit/.test(line.msg));
    expect(warning).toMatchObject({ open_files: OPEN_FILES, per_listener: perListener });
  });
});
