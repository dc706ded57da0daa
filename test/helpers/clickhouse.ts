import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.ts';

const BINARY = '/usr/sbin/clickhouse-server';
// util-linux (Essential in Debian): its --pdeathsig makes the server die with the test process.
const SETPRIV = '/usr/bin/setpriv';
const DIR_PREFIX = 'agent-ingress-clickhouse-';
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;
const LOG_TAIL_BYTES = 4096;

/** A ClickHouse server of the machine's own package, private to one test file. */
export interface ClickHouseServer {
  /** `http://127.0.0.1:PORT`, the HTTP interface (user `default`, empty password). */
  url: string;
  /** `SELECT version()`, e.g. `18.16.1`: lets tests pick the DDL the server supports. */
  version: string;
  /** SIGTERM and wait for the exit, for fault tests; the data stays on disk. */
  stop(): Promise<void>;
  /** Starts again on the same ports with the same data; a no-op while running. */
  start(): Promise<void>;
  /** Stops the server and deletes its temp dir. */
  close(): Promise<void>;
  /** Runs one statement over plain HTTP; returns the body, throws on a non-200 answer. */
  query(sql: string): Promise<string>;
}

interface Ports {
  http: number;
  tcp: number;
  interserver: number;
}

const liveServers = new Set<ChildProcess>();
const liveDirs = new Set<string>();
process.once('exit', () => {
  // Safety net for a test that forgot close(); a hard-killed runner is reaped on next start.
  for (const child of liveServers) child.kill('SIGKILL');
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

/** Starts clickhouse-server on free 127.0.0.1 ports in a fresh temp dir; resolves once it answers. */
export async function startClickHouse(): Promise<ClickHouseServer> {
  reapOrphans();
  for (let attempt = 1; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
    liveDirs.add(dir);
    writeFileSync(join(dir, 'owner.pid'), String(process.pid));
    const ports = { http: await freePort(), tcp: await freePort(), interserver: await freePort() };
    writeFileSync(join(dir, 'config.xml'), configXml(dir, ports));
    writeFileSync(join(dir, 'users.xml'), USERS_XML);
    try {
      return await manage(dir, ports);
    } catch (err) {
      removeDir(dir);
      // Another process may take a port between freePort() and the server's bind.
      if (attempt >= 3 || !/Address already in use/.test(String(err))) throw err;
    }
  }
}

/** Wraps one temp dir's server in the ClickHouseServer lifecycle. */
async function manage(dir: string, ports: Ports): Promise<ClickHouseServer> {
  const url = `http://127.0.0.1:${ports.http}`;
  let child: ChildProcess | undefined;

  const query = async (sql: string): Promise<string> => {
    const res = await fetch(url, { method: 'POST', body: sql });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`ClickHouse HTTP ${res.status}: ${body.trim()}`);
    return body;
  };
  const start = async () => {
    if (child && child.exitCode === null && child.signalCode === null) return;
    child = await launch(dir, url);
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (running) await terminate(running);
  };

  await start();
  let version: string;
  try {
    version = (await query('SELECT version()')).trim();
  } catch (err) {
    await stop();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    url,
    version,
    start,
    stop,
    query,
    close() {
      closing ??= stop().finally(() => removeDir(dir));
      return closing;
    },
  };
}

/** Spawns the server and waits for `GET /ping`; on failure kills it and reports the log tail. */
async function launch(dir: string, url: string): Promise<ChildProcess> {
  const args = [`--config-file=${join(dir, 'config.xml')}`];
  // setpriv execs the server in place, so the pid (and SIGTERM from stop()) stay the server's.
  const [command, argv] = existsSync(SETPRIV)
    ? [SETPRIV, ['--pdeathsig', 'TERM', BINARY, ...args]]
    : [BINARY, args];
  const child = spawn(command, argv, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  liveServers.add(child);
  child.once('exit', () => liveServers.delete(child));
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-LOG_TAIL_BYTES);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  child.once('error', (err) => collect(Buffer.from(`spawn error: ${err.message}\n`)));
  if (child.pid) writeFileSync(join(dir, 'server.pid'), String(child.pid));

  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) {
      await sleep(50); // let the last log lines reach the file
      throw new Error(`clickhouse-server exited during start\n${logTail(dir, output)}`);
    }
    if (await answersPing(url)) return child;
    await sleep(50);
  }
  await terminate(child);
  throw new Error(`clickhouse-server not ready in ${START_TIMEOUT_MS} ms\n${logTail(dir, output)}`);
}

/** True when the server answers its health check. */
async function answersPing(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1000) });
    return (await res.text()).trim() === 'Ok.';
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL if the server has not exited in time. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Deletes a server's temp dir (data, logs, config). */
function removeDir(dir: string): void {
  liveDirs.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** The ends of the server's own logs and its stdout/stderr, for start-failure messages. */
function logTail(dir: string, output: string): string {
  const parts = ['clickhouse-server.err.log', 'clickhouse-server.log'].map((name) => {
    const path = join(dir, name);
    const text = existsSync(path) ? readFileSync(path, 'utf8').slice(-LOG_TAIL_BYTES) : '(none)';
    return `--- ${path} ---\n${text}`;
  });
  return [...parts, `--- stdout/stderr ---\n${output || '(empty)'}`].join('\n');
}

/** Kills servers whose test process died without cleanup (SIGKILL, crash) and removes their dirs. */
function reapOrphans(): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), name);
    const owner = readPid(join(dir, 'owner.pid'));
    // No owner.pid yet: another worker is between mkdtemp and writing it; leave that dir.
    if (owner === undefined || isAlive(owner)) continue;
    const server = readPid(join(dir, 'server.pid'));
    if (server !== undefined && isAlive(server) && isClickHouse(server)) {
      try {
        process.kill(server, 'SIGKILL');
      } catch {
        // Another worker reaped it first.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The pid stored in a file, if the file exists and holds one. */
function readPid(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8'), 10);
    return pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** True when a process with this pid exists. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Guards against pid reuse: only ever kill a clickhouse-server. */
function isClickHouse(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('clickhouse-server');
  } catch {
    return false;
  }
}

/**
 * Server config for 18.16 (Debian's package): the keys of /etc/clickhouse-server/config.xml it
 * needs, every path in the temp dir, loopback only, small caches, UTC, no system log tables.
 */
function configXml(dir: string, ports: Ports): string {
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>information</level>
    <log>${dir}/clickhouse-server.log</log>
    <errorlog>${dir}/clickhouse-server.err.log</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${ports.http}</http_port>
  <tcp_port>${ports.tcp}</tcp_port>
  <interserver_http_port>${ports.interserver}</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <max_connections>256</max_connections>
  <max_concurrent_queries>50</max_concurrent_queries>
  <keep_alive_timeout>3</keep_alive_timeout>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <mlock_executable>false</mlock_executable>
</yandex>
`;
}

/** Users: `default` without a password, and `tester`/`secret` for authentication tests. */
const USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>2000000000</max_memory_usage>
      <use_uncompressed_cache>0</use_uncompressed_cache>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
    <tester>
      <password>secret</password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </tester>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries>
        <errors>0</errors>
        <result_rows>0</result_rows>
        <read_rows>0</read_rows>
        <execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
`;
