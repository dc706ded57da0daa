import { AGENT_SETTINGS } from './agent-settings.ts';
import { CERTIFICATE_SETTINGS } from './certificate-settings.ts';
import {
  bytes,
  count,
  directory,
  dnsLabel,
  dnsName,
  domain,
  integer,
  list,
  ms,
  oneOf,
  optional,
  optionalPort,
  parseSecretsKey,
  portRange,
  secretsKey,
  text,
  token16,
  url,
} from './kinds.ts';
import { EVERY, GiB, HOUR, KiB, MiB, type Setting } from './setting.ts';

export type { Plane, Setting } from './setting.ts';

// Every setting of the service, declared once. The parser (load.ts), the Config type, `npm start
// -- --help` and docs/configuration.md (`npm run docs:config`) are derived from this table; to add
// a setting, add one entry here (see docs/configuration.md's header).
//
// Settings are read in this order: a default or bound that names another setting (PUBLIC_URL's
// HOST and PORT, HEADERS_TIMEOUT_MS's REQUEST_TIMEOUT_MS) names one above it. The agent plane's
// settings (agent-settings.ts) and the certificate jobs' (certificate-settings.ts) follow these.

/** The settings shared by the planes, the data plane's and the control plane's. */
const SERVICE_SETTINGS = {
  port: {
    env: 'PORT',
    planes: ['data', 'control'],
    kind: integer({ default: 8080, min: 0, max: 65535 }),
    meaning: 'HTTP port of the REST API and the Connect-RPC ingest API (one server).',
  },
  grpcPort: {
    env: 'GRPC_PORT',
    planes: ['data'],
    kind: optionalPort(),
    meaning:
      'When set, an HTTP/2 cleartext (h2c) listener on this port serves the ingest API to gRPC clients.',
  },
  host: {
    env: 'HOST',
    planes: EVERY,
    kind: text('127.0.0.1', 'an address or host name'),
    meaning: 'Interface every listener binds to (`0.0.0.0` in containers).',
  },
  publicUrl: {
    env: 'PUBLIC_URL',
    planes: ['control', 'agent'],
    kind: url('http://HOST:PORT', (earlier) => {
      const host = earlier.HOST === '0.0.0.0' ? 'localhost' : earlier.HOST;
      return `http://${host}:${earlier.PORT}`;
    }),
    meaning:
      'Base of every `uri` in responses and events (unset: `http://HOST:PORT`, `localhost` for `0.0.0.0`).',
  },
  dataDir: {
    env: 'DATA_DIR',
    planes: EVERY,
    kind: directory('./data'),
    meaning:
      'Where the embedded store, spools, file destinations, the SSH host key and a generated secrets key live (created mode 0700; an existing one is narrowed to 0700).',
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    planes: EVERY,
    kind: optional({
      accepts: 'postgres://… or postgresql://…',
      note: 'the embedded store',
      pattern: /^postgres(ql)?:\/\//,
      problem: () => 'must start with postgres:// or postgresql://',
    }),
    meaning:
      'PostgreSQL to use instead of the embedded store under DATA_DIR (the same migrations).',
  },
  nameServers: {
    env: 'NAME_SERVERS',
    planes: ['control', 'agent'],
    kind: list({
      default: 'ns1.agent-ingress.example,ns2.agent-ingress.example',
      accepts: 'comma-separated DNS names, at least one',
      item: dnsName,
      empty: 'must name at least one server',
    }),
    meaning: "The `ns_targets` of every ingress, and the NS records of the DNS server's zones.",
  },
  serviceDomain: {
    env: 'SERVICE_DOMAIN',
    planes: ['control', 'agent'],
    kind: domain('agent-ingress.example'),
    meaning:
      "The service's own domain: a reserved domain under it is a service subdomain (no `cname_target`), and custom domains get CNAME targets under `cname.<SERVICE_DOMAIN>`.",
  },
  regions: {
    env: 'REGIONS',
    planes: ['control', 'agent'],
    kind: list({
      default: 'au,eu,ap,us,us-cal-1,jp,in,sa',
      accepts: 'comma-separated DNS labels',
      item: dnsLabel,
    }),
    meaning: 'One `region_domains` entry per region: a region added here appears on every ingress.',
  },
  ingestTokens: {
    env: 'INGEST_TOKENS',
    planes: ['data'],
    kind: list({
      default: '',
      accepts: 'comma-separated tokens of at least 16 characters',
      item: token16,
    }),
    meaning:
      'Tokens edge proxies present to the ingest API (not API keys); none: ingest is closed.',
  },
  logLevel: {
    env: 'LOG_LEVEL',
    planes: EVERY,
    kind: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    meaning: 'The least severe level written to the JSON log on stdout.',
  },
  bootstrapApiKey: {
    env: 'BOOTSTRAP_API_KEY',
    planes: ['control'],
    kind: optional({
      accepts: 'a token of 20–200 characters (letters, digits, _ - .)',
      note: 'a generated token, shown once',
      pattern: /^[A-Za-z0-9_\-.]{20,200}$/,
      problem: () => 'must be 20-200 characters of letters, digits, "_", "-" or "."',
    }),
    meaning: 'Token of the first API key, created on an empty store.',
  },
  maxBodyBytes: {
    env: 'MAX_BODY_BYTES',
    planes: ['control'],
    kind: bytes(MiB, KiB, 64 * MiB),
    meaning: 'Largest REST request body (413 beyond).',
  },
  // 4 MiB, gRPC's default message size: the bound the workers' heaps and the in-flight budget
  // were sized with (docs/decisions.md#ingest-bounds).
  maxIngestBytes: {
    env: 'MAX_INGEST_BYTES',
    planes: ['data'],
    kind: bytes(4 * MiB, KiB, 256 * MiB),
    meaning:
      "Largest ingest request, a `Publish` or one `PublishStream` message, decompressed (RESOURCE_EXHAUSTED beyond); it also sizes the workers' heaps.",
  },
  maxIngestEvents: {
    env: 'MAX_INGEST_EVENTS',
    planes: ['data'],
    kind: count(10_000, 1, 10_000_000),
    meaning:
      'Most events in one `Publish` or `PublishStream` message (RESOURCE_EXHAUSTED beyond: split it).',
  },
  maxInflightRequests: {
    env: 'MAX_INFLIGHT_REQUESTS',
    planes: ['data'],
    kind: count(256, 1, 100_000),
    meaning:
      'Ingest requests in progress and open `PublishStream`s at once before RESOURCE_EXHAUSTED.',
  },
  maxInflightBytes: {
    env: 'MAX_INFLIGHT_BYTES',
    planes: ['data'],
    kind: bytes(48 * MiB, KiB, 2 ** 40, 'MAX_INGEST_BYTES'),
    meaning:
      "Bytes all ingest requests and streams may hold at once (bodies as read, their routed records, a stream's answers so far); a request that does not fit is refused before its body is read (RESOURCE_EXHAUSTED, retry).",
  },
  maxStreamEvents: {
    env: 'MAX_STREAM_EVENTS',
    planes: ['data'],
    kind: count(100_000, 1, 100_000_000),
    meaning:
      'Most events one `PublishStream` may carry in all, as its answer lists every id (beyond, it ends with RESOURCE_EXHAUSTED: open a new stream).',
  },
  maxStreamBytes: {
    env: 'MAX_STREAM_BYTES',
    planes: ['data'],
    kind: bytes(GiB, KiB, 2 ** 50),
    meaning:
      'Most bytes one `PublishStream` may carry in all (beyond, it ends with RESOURCE_EXHAUSTED: open a new stream).',
  },
  streamIdleTimeoutMs: {
    env: 'STREAM_IDLE_TIMEOUT_MS',
    planes: ['data'],
    kind: ms(60_000, 1, HOUR),
    meaning:
      'A `PublishStream` whose next message does not arrive within this is ended (UNAVAILABLE).',
  },
  workerThreads: {
    env: 'WORKER_THREADS',
    planes: ['data'],
    kind: count(2, 1, 64),
    meaning: 'Worker threads that route, filter and project events.',
  },
  batchMaxEvents: {
    env: 'BATCH_MAX_EVENTS',
    planes: ['data'],
    kind: count(10_000, 1, 1_000_000),
    meaning: "A destination's batch is written when it holds this many records.",
  },
  batchMaxBytes: {
    env: 'BATCH_MAX_BYTES',
    planes: ['data'],
    kind: bytes(4 * MiB, KiB, 256 * MiB),
    meaning:
      "A destination's batch is written when its NDJSON (newlines included) reaches this size.",
  },
  batchLingerMs: {
    env: 'BATCH_LINGER_MS',
    planes: ['data'],
    kind: ms(0, 0, 60_000),
    meaning:
      "A destination's batch is written this long after its first record when no write is in flight and the last one ended within this time, an idle destination's at the end of the event loop's turn (0: always); records that arrive during a write go as one batch as soon as it ends (group commit).",
  },
  spoolMaxBytes: {
    env: 'SPOOL_MAX_BYTES',
    planes: ['data'],
    kind: bytes(GiB, KiB, 2 ** 50),
    meaning:
      'Bytes each failing destination may hold in its spool on local disk (beyond: backpressure).',
  },
  shutdownTimeoutMs: {
    env: 'SHUTDOWN_TIMEOUT_MS',
    planes: EVERY,
    kind: ms(30_000, 0, 600_000),
    meaning:
      'How long a graceful shutdown after SIGTERM or SIGINT may take before the process exits with 1.',
  },
  rateLimitPerSecond: {
    env: 'RATE_LIMIT_PER_SECOND',
    planes: ['control'],
    kind: count(50, 1, 1_000_000),
    meaning: 'REST requests per second each API key may make, sustained (429 beyond).',
  },
  rateLimitBurst: {
    env: 'RATE_LIMIT_BURST',
    planes: ['control'],
    kind: count(100, 1, 1_000_000),
    meaning: 'REST requests an API key may make at once before the per-second rate applies.',
  },
  secretsKey: {
    env: 'SECRETS_KEY',
    planes: EVERY,
    kind: secretsKey('DATA_DIR/secrets.key'),
    meaning:
      'Key that seals destination passwords and private keys in the store and signs the relay (`openssl rand -base64 32`); required with DATABASE_URL, the same on every instance, and generated into DATA_DIR/secrets.key (0600) on the first start with the embedded store.',
  },
  secretsKeyPrevious: {
    env: 'SECRETS_KEY_PREVIOUS',
    planes: EVERY,
    kind: list({
      default: '',
      accepts: 'comma-separated keys like SECRETS_KEY',
      item: parseSecretsKey,
    }),
    meaning:
      'Earlier keys, accepted to open sealed values while a rotation seals them again with SECRETS_KEY.',
  },
  requestTimeoutMs: {
    env: 'REQUEST_TIMEOUT_MS',
    planes: ['data', 'control'],
    kind: ms(30_000, 100, HOUR),
    meaning:
      'Time a client has to send a whole HTTP/1.1 request, headers and body (408 and the connection closed beyond), a `PublishStream` over HTTP/1.1 too: long-lived streams belong on GRPC_PORT.',
  },
  headersTimeoutMs: {
    env: 'HEADERS_TIMEOUT_MS',
    planes: ['data', 'control'],
    kind: ms(10_000, 100, 'REQUEST_TIMEOUT_MS'),
    meaning: "Time a client has to send a request's headers.",
  },
  keepAliveTimeoutMs: {
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    planes: EVERY,
    kind: ms(72_000, 100, HOUR),
    meaning:
      'An idle keep-alive connection (or HTTP/2 session) is closed after this: keep it above the idle timeout of the load balancer in front.',
  },
  maxConnections: {
    env: 'MAX_CONNECTIONS',
    planes: EVERY,
    kind: count(512, 1, 1_000_000),
    meaning:
      'Client connections each listener holds at once (beyond: 503 on HTTP, an SSH disconnect, a close elsewhere), lowered at start to what the open-file limit (`ulimit -n`) allows.',
  },
  tcpAddrPorts: {
    env: 'TCP_ADDR_PORTS',
    planes: ['control', 'agent'],
    kind: portRange('20000-29999'),
    meaning:
      'Ports TCP addresses (`<region>.tcp.<SERVICE_DOMAIN>:<port>`) are allocated from, in every region: reserved ones, and those an ngrok agent is given for its session when its TCP endpoint names no address.',
  },
  ipRestrictionCacheTtlMs: {
    env: 'IP_RESTRICTION_CACHE_TTL_MS',
    planes: ['control', 'agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      "How long an instance keeps an account's IP restrictions in memory: a change made through this instance applies at once, one made through another within this time.",
  },
} satisfies Record<string, Setting<unknown>>;

/** The settings, by the name of their Config field, in the order they are read. */
export const SETTINGS = { ...SERVICE_SETTINGS, ...AGENT_SETTINGS, ...CERTIFICATE_SETTINGS };
