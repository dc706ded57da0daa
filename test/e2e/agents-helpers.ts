import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Service } from '../../src/service.ts';

// Real OpenSSH clients and a real local HTTP server for the agents' end-to-end tests.

/** A local service an agent exposes: it answers what it received, as JSON. */
export async function startEchoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/slow') return; // never answers: the edge's 504
      const body = JSON.stringify({
        method: request.method,
        url: request.url,
        host: request.headers.host,
        forwardedFor: request.headers['x-forwarded-for'],
        body: Buffer.concat(chunks).toString('utf8'),
      });
      response.writeHead(200, { 'content-type': 'application/json', 'x-echo': 'Yes' });
      response.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** A running `ssh -N -R` client, its output so far, and how it ended. */
export interface SshAgent {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  kill(): Promise<void>;
}

/** Starts `ssh -N -R <hostname>:80:127.0.0.1:<localPort>` against the service's agent port. */
export function startSshAgent(
  service: Pick<Service, 'sshPort'>,
  opts: {
    user: string;
    hostname: string;
    localPort: number;
    identity?: string;
    /** The remote side of -R instead of `<hostname>:80` (e.g. a reserved address's port). */
    remote?: string;
    /** Ask for a shell (no -N), as `ssh -R …` typed without -N does. */
    shell?: boolean;
  },
): SshAgent {
  const auth =
    opts.identity === undefined
      ? ['-o', 'PubkeyAuthentication=no']
      : ['-o', 'IdentitiesOnly=yes', '-i', opts.identity];
  const args = [
    ...(opts.shell ? [] : ['-N']),
    '-R',
    `${opts.remote ?? `${opts.hostname}:80`}:127.0.0.1:${opts.localPort}`,
    '-p',
    String(service.sshPort),
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'ExitOnForwardFailure=yes',
    '-o',
    'BatchMode=yes',
    '-F',
    '/dev/null',
    ...auth,
    `${opts.user}@127.0.0.1`,
  ];
  const child = spawn('ssh', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  return {
    child,
    output: () => output,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Polls `probe` until it returns a value, or fails after `ms`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  what: string,
  ms = 15_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The account's session events in the outbox, oldest first. */
export async function sessionEvents(service: Service, accountId: string) {
  const rows = await service.db.query<{ event_type: string; envelope: any }>(
    `SELECT event_type, envelope FROM audit_outbox
     WHERE account_id = $1 AND event_type LIKE 'agent_session_%' ORDER BY seq`,
    [accountId],
  );
  return rows.rows.map((row) => ({
    type: row.event_type,
    ...(typeof row.envelope === 'string' ? JSON.parse(row.envelope) : row.envelope),
  }));
}

/**
 * `curl` through the edge with a Host header; status, headers and body. Asynchronous: the
 * service runs in this process and must go on answering while curl waits.
 */
export async function curl(
  edgePort: number,
  host: string,
  path: string,
  extra: string[] = [],
): Promise<{ status: number; body: string; headers: string }> {
  const { stdout: out } = await promisify(execFile)(
    'curl',
    ['-sS', '-D', '-', '-H', `Host: ${host}`, ...extra, `http://127.0.0.1:${edgePort}${path}`],
    { encoding: 'utf8', timeout: 20_000, maxBuffer: 16 * 1024 * 1024 },
  );
  const split = out.indexOf('\r\n\r\n');
  const headers = out.slice(0, split);
  return { status: Number(headers.split(' ')[1]), headers, body: out.slice(split + 4) };
}

/** Every event line a file destination's directory holds (rotated and open files). */
export function fileEvents(dir: string): any[] {
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true }).map(String);
  } catch {
    return [];
  }
  return names
    .filter((name) => /events-.*\.ndjson(\.open)?$/.test(name))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n'))
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}
