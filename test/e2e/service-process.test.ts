import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/free-port.ts';
import { apiClient } from '../helpers/service.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** Starts `npm start`'s command as a user would, and waits for the line saying where it listens. */
async function startProcess(
  env: Record<string, string>,
  command = [process.execPath, 'src/main.ts'],
) {
  const child = spawn(command[0], command.slice(1), {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // stdout: JSON log lines only; stderr: the banner for people (and the first key's token).
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const both = () => `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start:\n${both()}`)), 30_000);
    const check = () => {
      if (/Agent Ingress listening on/.test(stderr)) {
        clearTimeout(timer);
        setTimeout(resolve, 50);
      }
    };
    child.stderr.on('data', check);
    child.once('exit', (code) => reject(new Error(`service exited with ${code}:\n${both()}`)));
  });
  return { child, output: () => stderr, logs: () => stdout };
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the service as a process', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-e2e-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts on embedded defaults, prints the first key, serves the API, and stops cleanly', async () => {
    const port = await freePort();
    const env = { PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'info' };
    const first = await startProcess(env);
    const printed = first.output();
    // stdout is machine-readable: every line one JSON log record, the token in none of them.
    const logLines = first.logs().split('\n').filter(Boolean);
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(first.logs()).not.toContain('aik_');
    expect(printed).toContain(
      `Agent Ingress listening on http://127.0.0.1:${port} (store: pglite)`,
    );
    // The slow steps are said before they begin: a first start is not 15 s of silence.
    const store = join(dataDir, 'store');
    expect(printed.split('\n').slice(0, 2)).toEqual([
      `Creating the embedded store under ${store} (first start only)…`,
      'Starting the pipeline (2 worker threads)…',
    ]);
    // The SSH host key's fingerprint, as ssh shows it on first contact and ssh-keygen -l prints it.
    const keygen = execFileSync('ssh-keygen', ['-lf', join(dataDir, 'ssh_host_ed25519_key')], {
      encoding: 'utf8',
    });
    const fingerprint = /^256 (SHA256:[A-Za-z0-9+/]{43}) .*\(ED25519\)$/m.exec(keygen)?.[1];
    expect(fingerprint, keygen).toBeDefined();
    expect(printed).toContain(`SSH host key fingerprint: ${fingerprint} (ED25519)\n`);
    const token = /\n {2}(aik_[A-Za-z0-9_-]{43})\n/.exec(printed)?.[1];
    expect(token).toBeDefined();

    const api = apiClient(`http://127.0.0.1:${port}`, token);
    const created = await api('POST', '/agent_ingresses', {
      domain: 'agents.example.com',
      description: 'e2e',
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
    });
    expect(created.status).toBe(201);
    expect(created.body.uri).toBe(`http://127.0.0.1:${port}/agent_ingresses/${created.body.id}`);
    expect(
      (await api('PATCH', `/agent_ingresses/${created.body.id}`, { metadata: '{"v":1}' })).status,
    ).toBe(200);
    expect((await api('GET', '/agent_ingresses')).body.ingresses).toHaveLength(1);
    expect(await stop(first.child)).toBe(0);

    const second = await startProcess(env);
    expect(second.output()).not.toContain('aik_');
    expect(second.output()).toContain(`Opening the embedded store under ${store}…\n`);
    expect(second.logs()).not.toContain('aik_');
    const again = await api('GET', `/agent_ingresses/${created.body.id}`);
    expect(again.status).toBe(200);
    expect(again.body.metadata).toBe('{"v":1}');
    expect((await api('DELETE', `/agent_ingresses/${created.body.id}`)).status).toBe(204);
    expect(await stop(second.child)).toBe(0);
  });

  it('`npm start` passes SIGTERM on to the service, which shuts down and exits', async () => {
    const port = await freePort();
    const listeners = {
      SSH_PORT: 'off',
      AGENT_PORT: 'off',
      EDGE_HTTP_PORT: 'off',
      EDGE_HTTPS_PORT: 'off',
    };
    const env = { PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'info', ...listeners };
    const started = await startProcess(env, ['npm', 'start', '--silent']);
    const servicePid = JSON.parse(started.logs().split('\n')[0]).pid;
    expect(servicePid).not.toBe(started.child.pid);
    await stop(started.child);
    await expect.poll(() => isRunning(servicePid), { timeout: 15_000 }).toBe(false);
    expect(started.logs()).toContain('"msg":"shutting down"');
  });

  it('refuses to start on invalid configuration with one clear line', async () => {
    const child = spawn(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, PORT: 'eighty', DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(78);
    expect(stderr.trim()).toBe('invalid configuration: PORT must be a whole number, got "eighty"');
  });
});
