import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { type PortRange, parsePortRange } from '../shared/net/port-choice.ts';

/** Every setting of the service, read once from the environment at start. */
export interface Config {
  host: string;
  port: number;
  /** Port of the HTTP/2 (h2c) listener for gRPC ingest; undefined: no gRPC listener. */
  grpcPort: number | undefined;
  /** Base of every `uri` the API returns. */
  publicUrl: string;
  dataDir: string;
  /** PostgreSQL connection string; when absent the embedded PGlite store under dataDir is used. */
  databaseUrl: string | undefined;
  nameServers: string[];
  /** The service's own domain: reserved domains under it are its subdomains; CNAME targets. */
  serviceDomain: string;
  regions: string[];
  /** Tokens edge proxies present to the ingest API (not API keys). */
  ingestTokens: string[];
  logLevel: string;
  /** When set, the first API key created on an empty store gets this token. */
  bootstrapApiKey: string | undefined;
  /** Largest REST request body, bytes. */
  maxBodyBytes: number;
  /** Largest ingest request (a Publish, or one PublishStream message), bytes. */
  maxIngestBytes: number;
  /** Most events in one ingest request (a Publish, or one PublishStream message). */
  maxIngestEvents: number;
  /** Ingest requests and open PublishStreams at once before RESOURCE_EXHAUSTED. */
  maxInflightRequests: number;
  /** Bytes all ingest requests and streams may hold at once before RESOURCE_EXHAUSTED. */
  maxInflightBytes: number;
  /** Most events one PublishStream may carry (its answer lists every id). */
  maxStreamEvents: number;
  /** Most bytes one PublishStream may carry. */
  maxStreamBytes: number;
  /** A PublishStream that sends nothing for this long is ended. */
  streamIdleTimeoutMs: number;
  workerThreads: number;
  batchMaxEvents: number;
  batchMaxBytes: number;
  batchLingerMs: number;
  /** Bytes each destination may hold in its local spool while it is failing. */
  spoolMaxBytes: number;
  shutdownTimeoutMs: number;
  /** REST requests each API key may make per second, sustained (token bucket refill rate). */
  rateLimitPerSecond: number;
  /** REST requests an API key may make at once before the per-second rate applies. */
  rateLimitBurst: number;
  /** Key that encrypts destination secrets in the store; unset: DATA_DIR/secrets.key. */
  secretsKey: Buffer | undefined;
  /** Earlier keys, accepted to decrypt while a rotation re-encrypts with secretsKey. */
  secretsKeyPrevious: Buffer[];
  /** Time a client has to send a whole HTTP/1.1 request, headers and body, ms. */
  requestTimeoutMs: number;
  /** Time a client has to send a request's headers, ms (at most requestTimeoutMs). */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection (or HTTP/2 session) stays open, ms. */
  keepAliveTimeoutMs: number;
  /** Client connections each listener holds at once; beyond, 503 ERR_TOO_MANY_CONNECTIONS. */
  maxConnections: number;
  /** Port agents connect to over SSH (0: a random one); undefined: no agent listener. */
  sshPort: number | undefined;
  /** Time an SSH connection has to authenticate before it is disconnected, ms (LoginGraceTime). */
  sshLoginGraceMs: number;
  /** Unauthenticated SSH connections before new ones are refused, at random then all (MaxStartups). */
  sshMaxStartups: MaxStartups;
  /** Failed authentication attempts one SSH connection may make before it is disconnected. */
  sshMaxAuthTries: number;
  /** Port ngrok's agents and SDKs connect to over TLS (0: a random one); undefined: none. */
  agentPort: number | undefined;
  /** The certificate (PEM) of the agent listener's own connect name; '' for one made in DATA_DIR. */
  agentTlsCertFile: string;
  /** Its private key (PEM); set together with AGENT_TLS_CERT_FILE. */
  agentTlsKeyFile: string;
  /** Port of the edge's HTTP listener (0: a random one); undefined: no edge. */
  edgeHttpPort: number | undefined;
  /** Port of the edge's HTTPS listener, certificates chosen by SNI (0: random); undefined: none. */
  edgeHttpsPort: number | undefined;
  /** How long the HTTPS listener trusts its choice of certificate for a name, ms (other instances' changes). */
  edgeCertCacheMs: number;
  /** Live agent sessions one account may hold at once. */
  maxSessionsPerAccount: number;
  /** Edge requests one session carries at once (SSH channels); beyond, 503. */
  maxChannelsPerSession: number;
  /** How long the edge waits for an agent's response headers before answering 504, ms. */
  edgeResponseTimeoutMs: number;
  /** Interval of SSH keep-alives to agents; an agent missing three is dropped, ms. */
  agentKeepAliveMs: number;
  /** Where other instances reach this one's relay (listened on at its port); '' for none. */
  internalUrl: string;
  /** How long a session counts in the shared store without its instance renewing it, ms. */
  sessionLeaseMs: number;
  /** Port of the authoritative DNS server (UDP and TCP); undefined: no DNS server. */
  dnsPort: number | undefined;
  /** The edge's addresses per region (A and AAAA answers); a region not listed gets '*'. */
  edgeAddresses: Record<string, string[]>;
  /** How long an instance answers from its cached zone data before reading the store again, ms. */
  dnsCacheMs: number;
  /** A DNS/TCP connection with no query outstanding is closed after this, ms (RFC 7766 6.2.3). */
  dnsTcpIdleTimeoutMs: number;
  /** The longest a DNS/TCP connection stays open, ms. */
  dnsTcpTimeoutMs: number;
  /** The ACME server's directory. */
  acmeDirectoryUrl: string;
  /** A PEM file of extra CAs to trust for the ACME server (a test server such as pebble). */
  acmeCaFile: string | undefined;
  /** Contact address of the service's ACME account. */
  acmeEmail: string | undefined;
  /** `host:port` of the resolver that checks delegations; undefined: the system's resolvers. */
  delegationResolver: string | undefined;
  /** How often the certificate job runner looks for work, ms; 0: no runner. */
  certPollMs: number;
  /** How long a runner holds a job before another instance may take it over, ms. */
  certJobLeaseMs: number;
  /** Longest wait between retries of a failing certificate job, ms. */
  certRetryMaxMs: number;
  /** Ports reserved TCP addresses are allocated from, in every region. */
  tcpAddrPorts: PortRange;
  /** How long an instance trusts its cached IP restrictions of an account (changes made elsewhere). */
  ipRestrictionCacheTtlMs: number;
}

/**
 * OpenSSH's MaxStartups `start:rate:full`: from `start` unauthenticated connections on, a new one
 * is refused with probability `rate`%, rising linearly to 100% at `full`.
 */
export interface MaxStartups {
  start: number;
  rate: number;
  full: number;
}

/** A configuration value that prevents the service from starting. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

const DEFAULT_REGIONS = 'au,eu,ap,us,us-cal-1,jp,in,sa';
const DEFAULT_SERVICE_DOMAIN = 'agent-ingress.example';
const DEFAULT_NAME_SERVERS = 'ns1.agent-ingress.example,ns2.agent-ingress.example';
const LETS_ENCRYPT = 'https://acme-v02.api.letsencrypt.org/directory';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) {
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

function list(env: Env, name: string, fallback: string): string[] {
  const raw = env[name] ?? fallback;
  return raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

function hostnames(env: Env, name: string, fallback: string): string[] {
  const values = list(env, name, fallback).map((value) => value.toLowerCase());
  for (const value of values) {
    if (!value.split('.').every((label) => HOST_LABEL.test(label))) {
      throw new ConfigError(name, `has "${value}", which is not a valid DNS name`);
    }
  }
  return values;
}

function url(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  try {
    const parsed = new URL(raw);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error();
  } catch {
    throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
  }
  return raw.replace(/\/+$/, '');
}

/** INTERNAL_URL: a plain http:// URL with a port, or '' (unset). */
function internalUrl(env: Env): string {
  const raw = env.INTERNAL_URL || '';
  if (raw === '') return '';
  const parsed = URL.parse(raw);
  if (parsed?.protocol !== 'http:' || parsed.port === '' || parsed.pathname !== '/') {
    throw new ConfigError('INTERNAL_URL', `must be http://host:port, got "${raw}"`);
  }
  return parsed.origin;
}

/** A port, `0` for a random one, or `off` (undefined): a listener the service may skip. */
function optionalPort(env: Env, name: string, fallback: string): number | undefined {
  const raw = env[name] || fallback;
  return raw === 'off' ? undefined : integer({ [name]: raw }, name, 0, 0, 65535);
}

/**
 * EDGE_ADDRESSES: `region=ip|ip,…`; `*` names the addresses of regions not listed. Unset, every
 * region answers 127.0.0.1: the embedded setup runs the edge on this host.
 */
function edgeAddresses(env: Env): Record<string, string[]> {
  const addresses: Record<string, string[]> = {};
  for (const entry of list(env, 'EDGE_ADDRESSES', '*=127.0.0.1')) {
    const [region, ips = ''] = entry.split('=', 2).map((part) => part.trim().toLowerCase());
    const values = ips.split('|').map((ip) => ip.trim());
    if (region === '' || values.some((ip) => isIP(ip) === 0)) {
      throw new ConfigError('EDGE_ADDRESSES', `has "${entry}"; write region=ip|ip,… (or *=ip)`);
    }
    addresses[region] = values;
  }
  return addresses;
}

/** A `host:port` address (DELEGATION_RESOLVER). */
function hostPort(env: Env, name: string): string | undefined {
  const raw = env[name] || undefined;
  if (raw !== undefined && !/^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(raw)) {
    throw new ConfigError(name, `must be host:port, got "${raw}"`);
  }
  return raw;
}

/** SSH_MAX_STARTUPS: `start:rate:full`, or one number (every connection beyond it refused). */
function maxStartups(env: Env): MaxStartups {
  const raw = env.SSH_MAX_STARTUPS || '10:30:100';
  const numbers = /^\d+(:\d+:\d+)?$/.test(raw) ? raw.split(':').map(Number) : [];
  const [start, rate, full] = numbers.length === 1 ? [numbers[0], 100, numbers[0]] : numbers;
  if (numbers.length === 0 || start < 1 || rate > 100 || full < start) {
    throw new ConfigError(
      'SSH_MAX_STARTUPS',
      `must be start:rate:full (1 <= start <= full, rate 0-100) or one number, got "${raw}"`,
    );
  }
  return { start, rate, full };
}

/** AGENT_TLS_CERT_FILE and AGENT_TLS_KEY_FILE: both or neither. */
function agentTlsFiles(env: Env): { agentTlsCertFile: string; agentTlsKeyFile: string } {
  const agentTlsCertFile = env.AGENT_TLS_CERT_FILE ?? '';
  const agentTlsKeyFile = env.AGENT_TLS_KEY_FILE ?? '';
  if ((agentTlsCertFile === '') !== (agentTlsKeyFile === '')) {
    throw new ConfigError(
      'AGENT_TLS_CERT_FILE',
      'goes with AGENT_TLS_KEY_FILE: set both, or neither',
    );
  }
  return { agentTlsCertFile, agentTlsKeyFile };
}

function portRange(env: Env, name: string, fallback: string): PortRange {
  try {
    return parsePortRange(env[name] || fallback);
  } catch (error) {
    throw new ConfigError(name, (error as Error).message);
  }
}

/** A 32-byte key written as 64 hex digits or in base64; `name` says where it came from. */
export function parseSecretsKey(raw: string, name: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(raw)
    ? Buffer.from(raw, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(raw)
      ? Buffer.from(raw, 'base64')
      : undefined;
  if (key?.length !== 32) {
    throw new ConfigError(name, 'must be 32 bytes in base64 or hex (openssl rand -base64 32)');
  }
  return key;
}

/** Reads and validates the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(
      'LOG_LEVEL',
      `must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`,
    );
  }
  const nameServers = hostnames(env, 'NAME_SERVERS', DEFAULT_NAME_SERVERS);
  if (nameServers.length === 0)
    throw new ConfigError('NAME_SERVERS', 'must name at least one server');
  const regions = list(env, 'REGIONS', DEFAULT_REGIONS).map((r) => r.toLowerCase());
  for (const region of regions) {
    if (!HOST_LABEL.test(region)) {
      throw new ConfigError('REGIONS', `has "${region}", which is not a valid DNS label`);
    }
  }
  const ingestTokens = list(env, 'INGEST_TOKENS', '');
  for (const token of ingestTokens) {
    if (token.length < 16)
      throw new ConfigError('INGEST_TOKENS', 'has a token shorter than 16 characters');
  }
  const bootstrapApiKey = env.BOOTSTRAP_API_KEY || undefined;
  if (bootstrapApiKey !== undefined && !/^[A-Za-z0-9_\-.]{20,200}$/.test(bootstrapApiKey)) {
    throw new ConfigError(
      'BOOTSTRAP_API_KEY',
      'must be 20-200 characters of letters, digits, "_", "-" or "."',
    );
  }
  const requestTimeoutMs = integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  const headersTimeoutMs = integer(
    env,
    'HEADERS_TIMEOUT_MS',
    Math.min(10_000, requestTimeoutMs),
    100,
    requestTimeoutMs,
  );
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql://');
  }
  // 4 MiB, gRPC's default message size: the bound the workers' heaps and the in-flight budget
  // were sized with (docs/decisions.md#ingest-bounds).
  const maxIngestBytes = integer(env, 'MAX_INGEST_BYTES', 4 * 1024 * 1024, 1024, 256 * 1024 * 1024);
  const maxInflightBytes = integer(env, 'MAX_INFLIGHT_BYTES', 48 * 1024 * 1024, 1024, 2 ** 40);
  if (maxInflightBytes < maxIngestBytes) {
    throw new ConfigError(
      'MAX_INFLIGHT_BYTES',
      `must be at least MAX_INGEST_BYTES (${maxIngestBytes})`,
    );
  }
  return {
    host,
    port,
    grpcPort: env.GRPC_PORT ? integer(env, 'GRPC_PORT', 0, 0, 65535) : undefined,
    publicUrl: url(env, 'PUBLIC_URL', `http://${host === '0.0.0.0' ? 'localhost' : host}:${port}`),
    dataDir: resolve(env.DATA_DIR || './data'),
    databaseUrl,
    nameServers,
    serviceDomain: hostnames(env, 'SERVICE_DOMAIN', DEFAULT_SERVICE_DOMAIN)[0],
    regions,
    ingestTokens,
    logLevel,
    bootstrapApiKey,
    maxBodyBytes: integer(env, 'MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    maxIngestBytes,
    maxIngestEvents: integer(env, 'MAX_INGEST_EVENTS', 10_000, 1, 10_000_000),
    maxInflightRequests: integer(env, 'MAX_INFLIGHT_REQUESTS', 256, 1, 100_000),
    maxInflightBytes,
    maxStreamEvents: integer(env, 'MAX_STREAM_EVENTS', 100_000, 1, 100_000_000),
    maxStreamBytes: integer(env, 'MAX_STREAM_BYTES', 1024 * 1024 * 1024, 1024, 2 ** 50),
    streamIdleTimeoutMs: integer(env, 'STREAM_IDLE_TIMEOUT_MS', 60_000, 1, 3_600_000),
    workerThreads: integer(env, 'WORKER_THREADS', 2, 1, 64),
    batchMaxEvents: integer(env, 'BATCH_MAX_EVENTS', 10_000, 1, 1_000_000),
    batchMaxBytes: integer(env, 'BATCH_MAX_BYTES', 4 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    batchLingerMs: integer(env, 'BATCH_LINGER_MS', 5, 0, 60_000),
    spoolMaxBytes: integer(env, 'SPOOL_MAX_BYTES', 1024 * 1024 * 1024, 1024, 2 ** 50),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 30_000, 0, 600_000),
    rateLimitPerSecond: integer(env, 'RATE_LIMIT_PER_SECOND', 50, 1, 1_000_000),
    rateLimitBurst: integer(env, 'RATE_LIMIT_BURST', 100, 1, 1_000_000),
    secretsKey: env.SECRETS_KEY ? parseSecretsKey(env.SECRETS_KEY, 'SECRETS_KEY') : undefined,
    secretsKeyPrevious: list(env, 'SECRETS_KEY_PREVIOUS', '').map((raw) =>
      parseSecretsKey(raw, 'SECRETS_KEY_PREVIOUS'),
    ),
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    maxConnections: integer(env, 'MAX_CONNECTIONS', 512, 1, 1_000_000),
    sshPort: optionalPort(env, 'SSH_PORT', '2222'),
    sshLoginGraceMs: integer(env, 'SSH_LOGIN_GRACE_MS', 120_000, 100, 3_600_000),
    sshMaxStartups: maxStartups(env),
    sshMaxAuthTries: integer(env, 'SSH_MAX_AUTH_TRIES', 6, 1, 100),
    agentPort: optionalPort(env, 'AGENT_PORT', '4443'),
    ...agentTlsFiles(env),
    edgeHttpPort: optionalPort(env, 'EDGE_HTTP_PORT', '8088'),
    edgeHttpsPort: optionalPort(env, 'EDGE_HTTPS_PORT', '8443'),
    edgeCertCacheMs: integer(env, 'EDGE_CERT_CACHE_MS', 5_000, 0, 3_600_000),
    maxSessionsPerAccount: integer(env, 'MAX_SESSIONS_PER_ACCOUNT', 100, 1, 1_000_000),
    maxChannelsPerSession: integer(env, 'MAX_CHANNELS_PER_SESSION', 256, 1, 100_000),
    edgeResponseTimeoutMs: integer(env, 'EDGE_RESPONSE_TIMEOUT_MS', 60_000, 100, 3_600_000),
    agentKeepAliveMs: integer(env, 'AGENT_KEEPALIVE_MS', 15_000, 100, 3_600_000),
    internalUrl: internalUrl(env),
    sessionLeaseMs: integer(env, 'SESSION_LEASE_MS', 30_000, 300, 3_600_000),
    dnsPort: env.DNS_PORT ? integer(env, 'DNS_PORT', 0, 0, 65535) : undefined,
    edgeAddresses: edgeAddresses(env),
    dnsCacheMs: integer(env, 'DNS_CACHE_MS', 5_000, 0, 3_600_000),
    dnsTcpIdleTimeoutMs: integer(env, 'DNS_TCP_IDLE_TIMEOUT_MS', 10_000, 100, 3_600_000),
    dnsTcpTimeoutMs: integer(env, 'DNS_TCP_TIMEOUT_MS', 60_000, 100, 3_600_000),
    acmeDirectoryUrl: url(env, 'ACME_DIRECTORY_URL', LETS_ENCRYPT),
    acmeCaFile: env.ACME_CA_FILE || undefined,
    acmeEmail: env.ACME_EMAIL || undefined,
    delegationResolver: hostPort(env, 'DELEGATION_RESOLVER'),
    certPollMs: integer(env, 'CERT_POLL_MS', 5_000, 0, 3_600_000),
    certJobLeaseMs: integer(env, 'CERT_JOB_LEASE_MS', 300_000, 1_000, 86_400_000),
    certRetryMaxMs: integer(env, 'CERT_RETRY_MAX_MS', 3_600_000, 1_000, 86_400_000),
    tcpAddrPorts: portRange(env, 'TCP_ADDR_PORTS', '20000-29999'),
    ipRestrictionCacheTtlMs: integer(env, 'IP_RESTRICTION_CACHE_TTL_MS', 5_000, 0, 3_600_000),
  };
}
