import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  curl,
  eventually,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from '../e2e/agents-helpers.ts';
import { metric, openSsh, type RawSsh, runSsh, ssh2Agent } from '../helpers/listener-probes.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';

// The SSH listener's limits before a login, as OpenSSH's sshd has them, against the service as a
// process with real `ssh` clients and raw sockets: the login grace time (SSH_LOGIN_GRACE_MS),
// random early refusal of unauthenticated connections (SSH_MAX_STARTUPS), failed attempts per
// connection (SSH_MAX_AUTH_TRIES) and the session channels an agent may open.

const GRACE_MS = 5000;
const STARTUPS = { start: 5, full: 10 };
const MAX_AUTH_TRIES = 6;
const MAX_SESSION_CHANNELS = 10;
// Timers and a shared machine: how late a cut may come.
const SLACK_MS = 1500;
const DOMAIN = 'ssh-limits.example.com';
describe('SSH login limits', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-ssh-limits-'));
  let service: ServiceProcess;
  let sshPort: number;
  let edgePort: number;
  let token: string;
  let local: Server;
  let localPort: number;
  const open: Socket[] = [];
  const agents: SshAgent[] = [];

  /** An askpass program: sleeps `sleepS`, logs the prompt to `log`, answers `answer`. */
  function askpass(name: string, answer: string, sleepS = 0): { path: string; prompts(): number } {
    const path = join(dataDir, name);
    const log = `${path}.log`;
    writeFileSync(path, `#!/bin/sh\necho x >> '${log}'\nsleep ${sleepS}\necho '${answer}'\n`);
    chmodSync(path, 0o700);
    const prompts = () => {
      try {
        return readFileSync(log, 'utf8').trim().split('\n').length;
      } catch {
        return 0;
      }
    };
    return { path, prompts };
  }

  beforeAll(async () => {
    service = await startServiceProcess({
      dataDir,
      env: {
        SSH_LOGIN_GRACE_MS: String(GRACE_MS),
        SSH_MAX_STARTUPS: `${STARTUPS.start}:50:${STARTUPS.full}`,
      },
    });
    const ports = /SSH on port (\d+); the edge serves HTTP on port (\d+)/.exec(service.stderr())!;
    [sshPort, edgePort] = [Number(ports[1]), Number(ports[2])];
    await service.api('POST', '/agent_ingresses', { domain: DOMAIN });
    token = (await service.api('POST', '/credentials', {})).body.token;
    ({ server: local, port: localPort } = await startEchoServer());
  });
  afterAll(async () => {
    for (const socket of open) socket.destroy();
    for (const agent of agents) await agent.kill();
    local?.close();
    if (service?.running()) await service.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  /**
   * Starts an `ssh -N -R` agent for `hostname` and waits until the edge serves it; starts it
   * again when it was refused for a moment (a place freed that the service has yet to see).
   */
  async function agentFor(hostname: string): Promise<SshAgent> {
    for (let tries = 1; ; tries++) {
      const agent = startSshAgent({ sshPort }, { user: token, hostname, localPort });
      agents.push(agent);
      const served = await eventually(async () => {
        if (agent.child.exitCode !== null) return false;
        return (await curl(edgePort, hostname, '/')).status === 200 ? true : undefined;
      }, `the edge serving ${hostname}`);
      if (served) return agent;
      if (!/retry shortly/.test(agent.output()) || tries === 10) {
        throw new Error(`ssh exited: ${agent.output()}`);
      }
    }
  }

  it('refuses unauthenticated connections beyond SSH_MAX_STARTUPS with a reason ssh prints, while a logged-in agent serves on', async () => {
    const serving = `serving.${DOMAIN}`;
    await agentFor(serving);
    const held: RawSsh[] = [];
    // Below `start`, every connection is taken.
    for (let i = 0; i < STARTUPS.start; i++) held.push(await openSsh(sshPort, open));
    expect(held.map((c) => c.disconnect)).toEqual(Array(STARTUPS.start).fill(undefined));
    // From `start` on, some are refused at random; at `full`, every one.
    for (let tries = 0; held.length < STARTUPS.full && tries < 500; tries++) {
      const conn = await openSsh(sshPort, open);
      if (conn.disconnect === undefined) held.push(conn);
    }
    expect(held).toHaveLength(STARTUPS.full);
    for (let i = 0; i < 5; i++) {
      const refused = await openSsh(sshPort, open);
      expect(refused.disconnect).toEqual({
        code: 12, // SSH_DISCONNECT_TOO_MANY_CONNECTIONS
        reason: 'too many unauthenticated connections (SSH_MAX_STARTUPS); retry shortly',
      });
      await refused.closed;
    }
    const stock = await runSsh(sshPort, token);
    expect(stock.code).toBe(255);
    expect(stock.output).toMatch(
      /Received disconnect from 127\.0\.0\.1 port \d+:12: too many unauthenticated connections \(SSH_MAX_STARTUPS\)/,
    );
    // Meanwhile the agent logged in before keeps serving.
    expect((await curl(edgePort, serving, '/')).status).toBe(200);
    expect(
      await metric(
        service.url,
        'agent_ingress_listener_connections_refused_total',
        '{listener="ssh",limit="max_startups"}',
      ),
    ).toBeGreaterThanOrEqual(6);
    // Once the unauthenticated connections are gone, an agent logs in again.
    for (const conn of held) conn.socket.destroy();
    await agentFor(`after-startups.${DOMAIN}`);
  });

  it('closes connections not authenticated within SSH_LOGIN_GRACE_MS: silent ones, and ssh stalled after the key exchange with the reason', async () => {
    const started = Date.now();
    const silent = await Promise.all([1, 2, 3].map(() => openSsh(sshPort, open)));
    // A stock ssh whose password prompt takes longer than the grace.
    const stalled = askpass('askpass-slow', 'not-a-token', GRACE_MS / 1000 + 0.5);
    const stock = await runSsh(sshPort, 'someone', { askpass: stalled.path });
    for (const conn of silent) {
      const deadline = sleep(GRACE_MS + SLACK_MS).then(() => Number.POSITIVE_INFINITY);
      const closedAfter = (await Promise.race([conn.closed, deadline])) - started;
      expect(closedAfter).toBeGreaterThanOrEqual(GRACE_MS - 100);
      expect(closedAfter).toBeLessThan(GRACE_MS + SLACK_MS);
    }
    expect(stock.code).toBe(255);
    expect(stock.output).toMatch(
      new RegExp(`Received disconnect from .*: not authenticated within ${GRACE_MS} ms`),
    );
    expect(
      await metric(
        service.url,
        'agent_ingress_listener_connections_closed_total',
        '{listener="ssh",limit="login_grace"}',
      ),
    ).toBeGreaterThanOrEqual(4);
  });

  it(`disconnects after ${MAX_AUTH_TRIES} failed attempts with "Too many authentication failures", and lets a valid agent in`, async () => {
    const wrong = askpass('askpass-wrong', 'cr_not-a-valid-token');
    const stock = await runSsh(sshPort, 'someone', {
      askpass: wrong.path,
      extra: ['-o', 'NumberOfPasswordPrompts=20'],
    });
    expect(stock.code).toBe(255);
    expect(stock.output).toMatch(
      /Received disconnect from 127\.0\.0\.1 port \d+:14: Too many authentication failures/,
    );
    expect(wrong.prompts()).toBe(MAX_AUTH_TRIES);
    expect(
      await metric(
        service.url,
        'agent_ingress_listener_connections_closed_total',
        '{listener="ssh",limit="auth_tries"}',
      ),
    ).toBe(1);
    await agentFor(`after-auth.${DOMAIN}`);
  });

  it(`refuses an agent's session channel beyond ${MAX_SESSION_CHANNELS}, and every direct-tcpip channel`, async () => {
    const client = await ssh2Agent(sshPort, token);
    const shell = () =>
      new Promise<ssh2.ClientChannel>((resolve, reject) =>
        client.shell(false, (error, channel) => (error ? reject(error) : resolve(channel))),
      );
    try {
      const shells = [];
      for (let i = 0; i < MAX_SESSION_CHANNELS; i++) shells.push(await shell());
      await expect(shell()).rejects.toThrow(/open failure/i);
      // One closed, one more may open.
      shells[0].close();
      await eventually(() => shell().catch(() => undefined), 'a shell once one closed');
      const direct = new Promise((resolve, reject) =>
        client.forwardOut('127.0.0.1', 0, '127.0.0.1', localPort, (error) =>
          error ? resolve(error) : reject(new Error('direct-tcpip was opened')),
        ),
      );
      expect(String(await direct)).toMatch(/open failure/i);
      expect(await metric(service.url, 'agent_ingress_ssh_channels_refused_total')).toBe(1);
    } finally {
      client.end();
    }
  });
});
