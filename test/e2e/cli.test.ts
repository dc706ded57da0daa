import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runCliHere } from '../helpers/cli-here.ts';
import { type ProcessRun, runProcess } from '../helpers/run-process.ts';
import { apiClient } from '../helpers/service.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';

// `npm run cli` beside a real service process on the same embedded store and on a stopped one:
// the commands run in this process (runCliHere), `--help` also as a process of its own
// (node src/control-plane/cli/main.ts).

/** The CLI's environment for the embedded store under `dataDir` (DATABASE_URL unset). */
const storeEnv = (dataDir: string) => ({ DATA_DIR: dataDir, DATABASE_URL: '', LOG_LEVEL: 'warn' });

/** Runs the CLI here with the embedded store under `dataDir`. */
function runCli(args: string[], dataDir: string): Promise<ProcessRun> {
  return runCliHere(args, storeEnv(dataDir));
}

const TOKEN = /token {3}(aik_[A-Za-z0-9_-]+)/;

describe('the CLI', () => {
  const dirs: string[] = [];
  const services: ServiceProcess[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'agin-cli-'));
    dirs.push(dir);
    return dir;
  };
  const start = async (dir: string) => {
    const service = await startServiceProcess({ dataDir: dir });
    services.push(service);
    return service;
  };
  afterEach(async () => {
    for (const service of services.splice(0)) await service.stop('SIGKILL');
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it.each([['--help'], ['help'], ['-h']])('prints its usage for %s and exits 0', async (arg) => {
    const run = await runCli([arg], dataDir());
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain('create-key --account');
    expect(run.stdout).toContain('create-account');
  });

  it('prints the same usage as a process of its own', async () => {
    const dir = dataDir();
    const run = await runProcess(
      process.execPath,
      ['src/control-plane/cli/main.ts', '--help'],
      storeEnv(dir),
    );
    expect(run).toEqual(await runCli(['--help'], dir));
  });

  it('refuses to touch the embedded store of a running service, printing no token', async () => {
    const dir = dataDir();
    const service = await start(dir);
    const run = await runCli(['create-key', '--account', service.accountId!], dir);
    expect(run.code).not.toBe(0);
    expect(run.stdout).not.toMatch(TOKEN);
    expect(run.stderr).toContain(
      `the embedded store under ${join(dir, 'store')} is in use by process ${service.pid}`,
    );
    expect(run.stderr).toContain('DATABASE_URL');
    // The service is unharmed.
    expect((await service.api('GET', '/api_keys')).status).toBe(200);
  });

  it('refuses a second service on the same DATA_DIR', async () => {
    const dir = dataDir();
    const first = await start(dir);
    const second = startServiceProcess({ dataDir: dir });
    await expect(second).rejects.toThrow(`is in use by process ${first.pid}`);
    expect((await first.api('GET', '/api_keys')).status).toBe(200);
  });

  it.each(['SIGTERM', 'SIGKILL'] as const)(
    'creates a key on a store stopped by %s that works once the service runs again',
    async (signal) => {
      const dir = dataDir();
      const service = await start(dir);
      await service.stop(signal);
      const run = await runCli(['create-key', '--account', service.accountId!], dir);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const token = TOKEN.exec(run.stdout)?.[1];
      expect(token).toBeDefined();
      const restarted = await service.restart();
      services.push(restarted);
      expect((await apiClient(restarted.url, token)('GET', '/api_keys')).status).toBe(200);
    },
  );
});
