import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { addressInUse, onFreePort } from './free-port.ts';
import { TEST_INGEST_TOKEN } from './ingest-client.ts';
import { type ApiClient, apiClient } from './service.ts';
import { seedTestStore } from './store-template.ts';

// The service as a real process (`node src/main.ts`, what `npm start` runs), for tests that need
// signals: SIGTERM drain, SIGKILL and restart on the same DATA_DIR and port.

/** The checkout whose `src/main.ts` runs; SERVICE_ROOT picks another one (e.g. a snapshot). */
export const SERVICE_DIR = process.env.SERVICE_ROOT ?? join(import.meta.dirname, '..', '..');
// util-linux: --pdeathsig makes the service die with the test process (it execs node in place,
// so the pid and the signals the test sends stay the service's).
const SETPRIV = '/usr/bin/setpriv';
// util-linux too: runs the service with an open-file limit of its own (it execs node in place).
const PRLIMIT = '/usr/bin/prlimit';
const READY_LINE = /Agent Ingress listening on (\S+)/;
const ACCOUNT_LINE = /Created account (ac_[A-Za-z0-9]+)/;
// How long a start takes is not what these tests check, and a busy machine makes it many times
// slower: a start is waited for as long as the process uses CPU time (see waitForStart).
const STALL_MS = 20_000;
// Shared by every service the tests start: each first start on a fresh DATA_DIR would otherwise
// compile all modules again (the service keeps its own cache under DATA_DIR).
const COMPILE_CACHE = join(SERVICE_DIR, 'node_modules', '.cache', 'agent-ingress', 'compile-cache');

/** The API key every process started here gets on its empty store. */
export const PROCESS_BOOTSTRAP_KEY = 'fault_bootstrap_key_0123456789abcdef';

/** How a process ended. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What startServiceProcess needs; env adds to (and overrides) the defaults below. */
export interface ServiceProcessOptions {
  dataDir: string;
  /** Fixed port; a free one is picked when absent (restart() keeps it). */
  port?: number;
  env?: Record<string, string>;
  /** Extra node options before the script, e.g. `--inspect=127.0.0.1:0`. */
  nodeArgs?: string[];
  /** The process's open-file limit (RLIMIT_NOFILE, soft and hard), as `ulimit -n` would set it. */
  openFiles?: number;
  /**
   * An empty DATA_DIR gets the tests' migrated store (store-template.ts) unless this is false:
   * the service's own first start (its template, initdb, migrations) is what the test is about.
   */
  seedStore?: boolean;
}

/** A running (or exited) service process. */
export interface ServiceProcess {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly child: ChildProcess;
  readonly options: ServiceProcessOptions & { port: number };
  /** REST client with the bootstrap key. */
  readonly api: ApiClient;
  /** The account the first start created (parsed from its stderr banner; undefined on a restart). */
  readonly accountId: string | undefined;
  stdout(): string;
  stderr(): string;
  /** stdout's pino lines, parsed (other lines skipped). */
  logs(): Record<string, any>[];
  /** Resolves when the process has exited. */
  readonly exited: Promise<ProcessExit>;
  running(): boolean;
  /** Sends a signal and waits for the exit; SIGKILL follows after timeoutMs (default 60 s). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<ProcessExit & { ms: number }>;
  /** A new process with the same options (DATA_DIR, port, env); this one must have exited. */
  restart(env?: Record<string, string>): Promise<ServiceProcess>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  // Safety net for a test that forgot to stop its service; setpriv covers a killed runner.
  for (const child of live) child.kill('SIGKILL');
});

/** Starts `node src/main.ts` and resolves once it prints where it listens. */
export async function startServiceProcess(options: ServiceProcessOptions): Promise<ServiceProcess> {
  if (options.port !== undefined) return startOnPort(options, options.port);
  return onFreePort((port) => startOnPort(options, port));
}

/** Starts on `port`; a first start that finds the port taken leaves no store behind (retried). */
async function startOnPort(options: ServiceProcessOptions, port: number): Promise<ServiceProcess> {
  const store = join(options.dataDir, 'store');
  const fresh = !existsSync(store);
  return startProcess(options, port).catch((error: unknown) => {
    // It made the store before it failed to listen: the next start is a first start again.
    if (fresh && addressInUse(error, port)) rmSync(store, { recursive: true, force: true });
    throw error;
  });
}

async function startProcess(options: ServiceProcessOptions, port: number): Promise<ServiceProcess> {
  // An empty embedded store: this start creates the account and says so on stderr.
  const firstStart = !options.env?.DATABASE_URL && !existsSync(join(options.dataDir, 'store'));
  // Another checkout's code (SERVICE_ROOT) may not know the migrations: it makes its own store.
  if (firstStart && options.seedStore !== false && process.env.SERVICE_ROOT === undefined) {
    seedTestStore(options.dataDir);
  }
  const resolved = { ...options, port };
  const env = {
    ...process.env,
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    DATA_DIR: options.dataDir,
    // The embedded store under DATA_DIR unless the test says otherwise, whatever the shell has.
    DATABASE_URL: '',
    LOG_LEVEL: 'warn',
    BOOTSTRAP_API_KEY: PROCESS_BOOTSTRAP_KEY,
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    NODE_COMPILE_CACHE: COMPILE_CACHE,
    // Random ports: processes run in parallel, and the defaults (2222, 8088, 8443) would clash.
    SSH_PORT: '0',
    AGENT_PORT: '0',
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    // No certificate runner: it would ask real resolvers and Let's Encrypt; its tests start one.
    CERT_POLL_MS: '0',
    ...options.env,
  };
  // The pinned runtime of this test process (vitest runs under npx's node 24).
  const node = [process.execPath, ...(options.nodeArgs ?? []), 'src/main.ts'];
  const limited =
    options.openFiles === undefined
      ? node
      : [PRLIMIT, `--nofile=${options.openFiles}:${options.openFiles}`, ...node];
  const [command, ...args] = existsSync(SETPRIV)
    ? [SETPRIV, '--pdeathsig', 'KILL', ...limited]
    : limited;
  const child = spawn(command, args, { cwd: SERVICE_DIR, env, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // 'close': stdout and stderr are drained by then, so the captured output is complete.
  const exited = new Promise<ProcessExit>((resolve) =>
    child.once('close', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );

  // Started: it says where it listens and, on a first start, which account it created (a
  // separate write, so it may come a moment later).
  await waitForStart(
    child,
    () => {
      if (!READY_LINE.test(stderr)) return 'the "listening" line';
      if (firstStart && !ACCOUNT_LINE.test(stderr)) return 'the "Created account" line';
      return undefined;
    },
    exited,
    () => `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`,
  );
  const url = READY_LINE.exec(stderr)![1];
  const accountId = ACCOUNT_LINE.exec(stderr)?.[1];

  const running = () => child.exitCode === null && child.signalCode === null;
  const service: ServiceProcess = {
    url,
    port,
    pid: child.pid!,
    child,
    options: resolved,
    api: apiClient(url, PROCESS_BOOTSTRAP_KEY),
    accountId,
    stdout: () => stdout,
    stderr: () => stderr,
    logs: () =>
      stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .flatMap((line) => {
          try {
            return [JSON.parse(line)];
          } catch {
            return [];
          }
        }),
    exited,
    running,
    async stop(signal = 'SIGTERM', timeoutMs = 60_000) {
      const started = Date.now();
      if (running()) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const exit = await exited;
      clearTimeout(timer);
      return { ...exit, ms: Date.now() - started };
    },
    async restart(extraEnv = {}) {
      if (running()) throw new Error('restart: the service is still running');
      return startServiceProcess({ ...resolved, env: { ...resolved.env, ...extraEnv } });
    },
  };
  return service;
}

/**
 * Polls until `awaiting()` (what the start has yet to print) is undefined; rejects when the
 * process exits first, or when it has used no CPU time for STALL_MS (it is stuck, e.g. waiting
 * for something that will not come: killed). There is no other deadline; where /proc cannot
 * tell CPU time, the test's own timeout bounds the wait.
 */
async function waitForStart(
  child: ChildProcess,
  awaiting: () => string | undefined,
  exited: Promise<ProcessExit>,
  output: () => string,
): Promise<void> {
  let exit: ProcessExit | undefined;
  exited.then((e) => {
    exit = e;
  });
  let ticks = cpuTicks(child.pid!);
  let progressAt = Date.now();
  for (let what = awaiting(); what !== undefined; what = awaiting()) {
    if (exit !== undefined) {
      const how = exit.code ?? exit.signal;
      throw new Error(`service exited during start (${how}) before ${what}\n${output()}`);
    }
    await sleep(25);
    const now = cpuTicks(child.pid!);
    if (now === undefined || now !== ticks) {
      ticks = now;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > STALL_MS) {
      child.kill('SIGKILL');
      throw new Error(
        `service stalled during start: no CPU time for ${STALL_MS} ms, and no ${what}\n${output()}`,
      );
    }
  }
}

/** User plus system CPU time a process has used, in clock ticks (undefined without /proc). */
function cpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // proc_pid_stat(5): after "pid (comm) " come state, …; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}
