import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/free-port.ts';
import { runProcess } from '../helpers/run-process.ts';
import {
  PROCESS_BOOTSTRAP_KEY,
  SERVICE_DIR,
  type ServiceProcess,
  startServiceProcess,
} from '../helpers/service-process.ts';
import { startEchoServer } from './agents-helpers.ts';

// README's "A five-minute tour", run line by line through bash as a reader would paste it, with
// only what a test must change: the ports (random here, so runs in parallel do not clash), the
// ids each step prints, and ssh kept away from the user's own keys and known_hosts.

const TOUR_TOKEN = 'tour-token-0123456789';

/** The tour's shell lines, continuation lines joined, comments dropped. */
function tourLines(): string[] {
  const readme = readFileSync(join(SERVICE_DIR, 'README.md'), 'utf8');
  const section = readme.slice(
    readme.indexOf('## A five-minute tour'),
    readme.indexOf('## The manual'),
  );
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block
    .replaceAll('\\\n', ' ')
    .split('\n')
    .map((line) => line.replace(/\s+# .*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

describe("README's five-minute tour", () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tour-'));
  let service: ServiceProcess | undefined;
  let upstream: Server | undefined;
  let agent: ChildProcess | undefined;

  afterAll(async () => {
    agent?.kill();
    upstream?.close();
    await service?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs as written, and the published event and the request through the edge land in the files', async () => {
    const [sshPort, edgePort] = [await freePort(), await freePort()];
    service = await startServiceProcess({
      dataDir,
      env: {
        INGEST_TOKENS: TOUR_TOKEN,
        SSH_PORT: String(sshPort),
        EDGE_HTTP_PORT: String(edgePort),
      },
    });
    const echo = await startEchoServer();
    upstream = echo.server;
    const known = join(dataDir, 'known_hosts');
    const values: Record<string, string> = { API_KEY: PROCESS_BOOTSTRAP_KEY };
    const env = { AGENT_INGRESS_URL: service.url };
    const lines = tourLines();
    expect(lines.length).toBeGreaterThanOrEqual(8);

    for (const written of lines) {
      const line = written
        .replace(/<([A-Z_]+)>/g, (_, name: string) => values[name] ?? `<${name}>`)
        .replace('-p 2222', `-p ${sshPort}`)
        .replace('127.0.0.1:8088', `127.0.0.1:${edgePort}`)
        .replace('localhost:8000', `localhost:${echo.port}`)
        .replace(
          '-o StrictHostKeyChecking=accept-new',
          `-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=${known} -F /dev/null -o BatchMode=yes -o PubkeyAuthentication=no -o ExitOnForwardFailure=yes`,
        );
      expect(line, 'every placeholder is known by the time its line runs').not.toMatch(/<[A-Z_]+>/);
      if (line.startsWith('export ')) {
        const [name, value] = line.slice('export '.length).split('=');
        Object.assign(env, { [name]: value });
        continue;
      }
      if (line.endsWith('&')) {
        agent = spawn('bash', ['-c', line.slice(0, -1)], {
          cwd: SERVICE_DIR,
          env: { ...process.env, ...env },
        });
        await untilSessionServes(service, 'app.us.agents.example.com');
        continue;
      }
      const run = await runProcess('bash', ['-c', line], env);
      expect(run.code, `${written}\n${run.stderr}`).toBe(0);
      const destination = /"id": "(ed_[A-Za-z0-9]+)"/.exec(run.stdout);
      if (line.includes('event_destinations create') && destination) values.ED_ID = destination[1];
      const token = /"token": "([^"]+)"/.exec(run.stdout);
      if (line.includes('credentials create') && token) values.AUTHTOKEN = token[1];
      if (line.startsWith('curl'))
        expect(JSON.parse(run.stdout)).toMatchObject({ method: 'GET', url: '/' });
    }

    const events = await untilEvents(
      join(dataDir, 'events', service.accountId ?? '', 'traffic'),
      2,
    );
    expect(events.map((event) => event.event_type).sort()).toEqual([
      'http_request_complete.v0',
      'tcp_connection_closed.v0',
    ]);
  }, 240_000);
});

/** Waits until the edge serves the hostname through an agent's session. */
async function untilSessionServes(service: ServiceProcess, hostname: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const { body } = await service.api('GET', '/tunnel_sessions');
    if (JSON.stringify(body).includes(hostname)) return;
    await sleep(100);
  }
  throw new Error(`no session serves ${hostname}`);
}

/** The events in a file destination's directory, once there are `count` of them. */
async function untilEvents(dir: string, count: number): Promise<{ event_type: string }[]> {
  let found: string[] = [];
  for (let i = 0; i < 300; i++) {
    // An open file ends in `.ndjson.open` until it rotates; its lines are already durable.
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) =>
      /\.ndjson(\.open)?$/.test(f),
    );
    const events = files.flatMap((file) =>
      readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
    );
    if (events.length >= count) return events;
    found = events.map((event) => event.event_type);
    await sleep(100);
  }
  throw new Error(`fewer than ${count} events under ${dir}: ${found.join(', ')}`);
}
