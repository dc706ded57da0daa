import { existsSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';
import { helpText } from './config/describe.ts';
import { ConfigError, loadConfig } from './config/load.ts';
import type { AgentPorts } from './service.ts';
import { setHeapGrowth } from './shared/heap-growth.ts';
import { openEarlyListener } from './shared/net/early-listener.ts';
import { StoreInUseError } from './store/store-lock.ts';

// Everything the service creates (store files, spools, event files, the secrets key) is for its
// own user: files 0600, directories 0700, whatever umask the shell had.
process.umask(0o077);

/** The settings that choose where the service listens, named when a listener cannot start. */
const LISTEN_SETTINGS =
  'HOST, PORT, GRPC_PORT, SSH_PORT, EDGE_HTTP_PORT, EDGE_HTTPS_PORT, DNS_PORT, INTERNAL_URL';

// `npm start -- --help`: the settings, whatever the environment holds; nothing is started.
if (process.argv.slice(2).some((arg) => arg === '--help' || arg === '-h')) {
  process.stdout.write(helpText());
  process.exit(0);
}

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(78);
}

// The agents' ports before anything slow: an agent reconnecting during the start (ngrok's SDKs
// retry 2.5 s after a restart began, then 125 s later) waits in them until the listeners are up.
const agentPorts: AgentPorts = await openAgentPorts().catch(refuse);

// Node keeps the compiled (type-stripped) modules under DATA_DIR, the service's own directory
// (not the shared temp dir, where another user could plant code), so a restart loads them in
// about half the time; the route-events workers inherit it through the environment. Only a
// cache: it stays off when it cannot be written; NODE_DISABLE_COMPILE_CACHE=1 turns it off. Not
// before DATA_DIR exists: Node would create it, and the service creates it as it sees fit.
if (existsSync(config.dataDir)) {
  const compileCache = enableCompileCache(join(config.dataDir, 'compile-cache')).directory;
  if (compileCache !== undefined) process.env.NODE_COMPILE_CACHE ??= compileCache;
}
setHeapGrowth();
const { createLogger } = await import('./shared/logger.ts');
const { startService } = await import('./service.ts');

const logger = createLogger(config.logLevel);
// Progress and the banner are for people and go to stderr: stdout carries only JSON log lines,
// and the first key's token never reaches a log pipeline.
const say = (line: string) => process.stderr.write(`${line}\n`);
const service = await startService(config, logger, say, agentPorts).catch(refuse);
logger.info({ url: service.url, store: service.db.kind }, 'listening');
say(`Agent Ingress listening on ${service.url} (store: ${service.db.kind})`);
if (service.sshPort !== undefined) {
  say(
    `Agents connect over SSH on port ${service.sshPort}; the edge serves HTTP on port ${service.edgePort ?? 'off'}, HTTPS on port ${service.edgeHttpsPort ?? 'off'}`,
  );
  // What ssh shows on first contact: agents compare it (docs/agents.md#host-key).
  say(`SSH host key fingerprint: ${service.sshHostKeyFingerprint} (ED25519)`);
}
if (service.agentPort !== undefined) {
  say(
    `ngrok's agents and SDKs connect over TLS on port ${service.agentPort} (server_addr: a region domain of an Agent Ingress, docs/agents.md)`,
  );
}
if (service.firstKey !== undefined) {
  const { firstKey } = service;
  process.stderr.write(
    config.bootstrapApiKey === undefined
      ? `Created account ${firstKey.accountId} and its first API key ${firstKey.id}.\n` +
          `Its token is shown only this once; keep it:\n\n  ${firstKey.token}\n\n`
      : `Created account ${firstKey.accountId} with BOOTSTRAP_API_KEY as API key ${firstKey.id}.\n`,
  );
}

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}

async function openAgentPorts(): Promise<AgentPorts> {
  const { host, sshPort, agentPort } = config;
  const ssh = sshPort === undefined ? undefined : await openEarlyListener(host, sshPort);
  const ngrok = agentPort === undefined ? undefined : await openEarlyListener(host, agentPort);
  return { ssh, ngrok };
}

/** Ends the process on a start's refusal (one line), or throws what is not one. */
function refuse(error: unknown): never {
  const [line, code] = refusal(error) ?? [];
  if (line === undefined) throw error;
  process.stderr.write(`${line}\n`);
  process.exit(code);
}

/**
 * A start that failed on what the operator set, as one line and an exit code; undefined for
 * anything else (a bug: its stack is what helps). A setting found wrong only at start (SECRETS_KEY
 * against the store, DATABASE_URL), a port taken, a store another process holds.
 */
function refusal(error: unknown): [string, number] | undefined {
  if (error instanceof ConfigError) return [error.message, 78]; // EX_CONFIG, as loadConfig's
  if (error instanceof StoreInUseError) return [error.message, 75]; // EX_TEMPFAIL: once it stops
  const { code, syscall, address, port } = error as NodeJS.ErrnoException & {
    address?: string;
    port?: number;
  };
  if (syscall !== 'listen' || (code !== 'EADDRINUSE' && code !== 'EACCES')) return undefined;
  const why = code === 'EADDRINUSE' ? 'the address is in use' : 'permission denied';
  return [`cannot listen on ${address}:${port}: ${why}; see ${LISTEN_SETTINGS}`, 78];
}
