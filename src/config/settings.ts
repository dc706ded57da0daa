import {
  bytes,
  count,
  directory,
  dnsLabel,
  dnsName,
  domain,
  integer,
  internalOrigin,
  type Kind,
  list,
  maxStartups,
  ms,
  oneOf,
  optional,
  optionalPort,
  parseSecretsKey,
  portRange,
  regionAddresses,
  secretsKey,
  switchablePort,
  text,
  token16,
  url,
} from './kinds.ts';

// Every setting of the service, declared once. The parser (load.ts), the Config type, `npm start
// -- --help` and docs/configuration.md (`npm run docs:config`) are derived from this table; to add
// a setting, add one entry here (see docs/configuration.md's header).
//
// Settings are read in this order: a default or bound that names another setting (PUBLIC_URL's
// HOST and PORT, HEADERS_TIMEOUT_MS's REQUEST_TIMEOUT_MS) names one above it.

/** The planes that read a setting (src/data-plane, src/control-plane, src/agent-plane). */
export type Plane = 'data' | 'control' | 'agent';

/** One setting: its variable, how it is read, which planes read it, and what it is for. */
export interface Setting<T> {
  env: string;
  planes: readonly Plane[];
  kind: Kind<T>;
  /** One sentence for people: the page and `--help` print it. */
  meaning: string;
}

const EVERY: readonly Plane[] = ['data', 'control', 'agent'];
const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The settings, by the name of their Config field. */
export const SETTINGS = {
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
    kind: ms(5, 0, 60_000),
    meaning:
      "A destination's batch is written this long after its first record when no write is in flight; records that arrive during a write go as one batch as soon as it ends (group commit).",
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
    planes: ['control'],
    kind: portRange('20000-29999'),
    meaning:
      'Ports reserved TCP addresses (`<region>.tcp.<SERVICE_DOMAIN>:<port>`) are allocated from, in every region.',
  },
  ipRestrictionCacheTtlMs: {
    env: 'IP_RESTRICTION_CACHE_TTL_MS',
    planes: ['control', 'agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      "How long an instance keeps an account's IP restrictions in memory: a change made through this instance applies at once, one made through another within this time.",
  },
  sshPort: {
    env: 'SSH_PORT',
    planes: ['agent'],
    kind: switchablePort(2222),
    meaning:
      'Port agents connect to over SSH (`ssh -R`); the host key is DATA_DIR/ssh_host_ed25519_key (0600, made on the first start).',
  },
  sshLoginGraceMs: {
    env: 'SSH_LOGIN_GRACE_MS',
    planes: ['agent'],
    kind: ms(120_000, 100, HOUR),
    meaning:
      "Time an SSH connection has to authenticate before it is disconnected (OpenSSH's LoginGraceTime).",
  },
  sshMaxStartups: {
    env: 'SSH_MAX_STARTUPS',
    planes: ['agent'],
    kind: maxStartups('10:30:100'),
    meaning:
      "Unauthenticated SSH connections as OpenSSH's MaxStartups: from `start` on a new one is refused with probability `rate`%, rising to all at `full`; one number refuses every connection beyond it.",
  },
  sshMaxAuthTries: {
    env: 'SSH_MAX_AUTH_TRIES',
    planes: ['agent'],
    kind: count(6, 1, 100),
    meaning:
      "Failed authentication attempts one SSH connection may make; the last ends it with `Too many authentication failures` (OpenSSH's MaxAuthTries).",
  },
  edgeHttpPort: {
    env: 'EDGE_HTTP_PORT',
    planes: ['agent'],
    kind: switchablePort(8088),
    meaning: "Port of the edge's HTTP listener, which routes by `Host` to agents' sessions.",
  },
  edgeHttpsPort: {
    env: 'EDGE_HTTPS_PORT',
    planes: ['agent'],
    kind: switchablePort(8443),
    meaning:
      "Port of the edge's HTTPS listener: the same routing as EDGE_HTTP_PORT, each handshake's certificate chosen by SNI.",
  },
  edgeCertCacheMs: {
    env: 'EDGE_CERT_CACHE_MS',
    planes: ['agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      "How long the HTTPS listener keeps its choice of certificate for a name: changes made on this instance apply at once, other instances' within this time.",
  },
  edgePolicyCacheMs: {
    env: 'EDGE_POLICY_CACHE_MS',
    planes: ['agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      "How long the edge keeps a hostname's cloud endpoint and Traffic Policy (and the IP policies its restrict-ips actions name): changes made on this instance apply at once, other instances' within this time.",
  },
  maxSessionsPerAccount: {
    env: 'MAX_SESSIONS_PER_ACCOUNT',
    planes: ['agent'],
    kind: count(100, 1, 1_000_000),
    meaning: 'Live agent sessions one account may hold at once; beyond, a bind is refused.',
  },
  maxChannelsPerSession: {
    env: 'MAX_CHANNELS_PER_SESSION',
    planes: ['agent'],
    kind: count(256, 1, 100_000),
    meaning:
      'Edge requests or TCP connections open at once through one session; beyond, the edge answers 503.',
  },
  edgeResponseTimeoutMs: {
    env: 'EDGE_RESPONSE_TIMEOUT_MS',
    planes: ['agent'],
    kind: ms(60_000, 100, HOUR),
    meaning:
      "How long the edge waits for an agent's response headers (a retry included, and an Upgrade's `101`) before answering 504.",
  },
  agentKeepAliveMs: {
    env: 'AGENT_KEEPALIVE_MS',
    planes: ['agent'],
    kind: ms(15_000, 100, HOUR),
    meaning:
      'Interval of SSH keep-alives to agents; after three unanswered the session ends (`keep-alive lost`).',
  },
  internalUrl: {
    env: 'INTERNAL_URL',
    planes: ['agent'],
    kind: internalOrigin(),
    meaning:
      "Where the other instances sharing the store reach this one's relay, which listens on HOST at that port and serves only requests signed with the same SECRETS_KEY (never route it from the internet); unset, another instance answers 502 for this one's sessions.",
  },
  sessionLeaseMs: {
    env: 'SESSION_LEASE_MS',
    planes: ['agent'],
    kind: ms(30_000, 300, HOUR),
    meaning:
      "How long a session counts in the store's session registry without its instance renewing it (every third of it): a crashed instance's hostnames are free after this, or when it starts again at the same INTERNAL_URL.",
  },
  dnsPort: {
    env: 'DNS_PORT',
    planes: ['agent'],
    kind: optionalPort(),
    meaning:
      'UDP and TCP port of the authoritative DNS server (port 53 needs `CAP_NET_BIND_SERVICE`).',
  },
  edgeAddresses: {
    env: 'EDGE_ADDRESSES',
    planes: ['agent'],
    kind: regionAddresses('*=127.0.0.1'),
    meaning: "The edge's addresses per region for the DNS server's A and AAAA answers.",
  },
  dnsCacheMs: {
    env: 'DNS_CACHE_MS',
    planes: ['agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      "How long an instance answers from cached zone data: a change through this instance applies at once, other instances' within this time.",
  },
  dnsTcpIdleTimeoutMs: {
    env: 'DNS_TCP_IDLE_TIMEOUT_MS',
    planes: ['agent'],
    kind: ms(10_000, 100, HOUR),
    meaning:
      'A DNS over TCP connection with no query outstanding is closed after this (RFC 7766 6.2.3; bytes of an unfinished query do not keep it open).',
  },
  dnsTcpTimeoutMs: {
    env: 'DNS_TCP_TIMEOUT_MS',
    planes: ['agent'],
    kind: ms(60_000, 100, HOUR),
    meaning: 'The longest a DNS over TCP connection stays open, however busy.',
  },
  acmeDirectoryUrl: {
    env: 'ACME_DIRECTORY_URL',
    planes: ['agent'],
    kind: url('https://acme-v02.api.letsencrypt.org/directory'),
    meaning:
      "The ACME server's directory (the default is Let's Encrypt production; staging: `https://acme-staging-v02.api.letsencrypt.org/directory`).",
  },
  acmeCaFile: {
    env: 'ACME_CA_FILE',
    planes: ['agent'],
    kind: optional({ accepts: 'a PEM file', note: 'the system CAs' }),
    meaning: 'Extra CAs to trust for the ACME server (a test server such as pebble).',
  },
  acmeEmail: {
    env: 'ACME_EMAIL',
    planes: ['agent'],
    kind: optional({ accepts: 'an email address', note: 'none' }),
    meaning: "Contact address of the service's ACME account.",
  },
  delegationResolver: {
    env: 'DELEGATION_RESOLVER',
    planes: ['agent'],
    kind: optional({
      accepts: 'host:port',
      note: "the system's resolvers",
      pattern: /^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/,
      problem: (raw) => `must be host:port, got "${raw}"`,
    }),
    meaning: "The resolver that checks a domain's delegation (its parent's NS records).",
  },
  certPollMs: {
    env: 'CERT_POLL_MS',
    planes: ['agent'],
    kind: ms(5_000, 0, HOUR),
    meaning:
      'How often the certificate job runner looks for due jobs; `0`: no runner on this instance.',
  },
  certJobLeaseMs: {
    env: 'CERT_JOB_LEASE_MS',
    planes: ['agent'],
    kind: ms(300_000, 1_000, DAY),
    meaning: 'How long a runner holds a certificate job before another instance may take it over.',
  },
  certRetryMaxMs: {
    env: 'CERT_RETRY_MAX_MS',
    planes: ['agent'],
    kind: ms(HOUR, 1_000, DAY),
    meaning: 'Longest wait between retries of a failing certificate job.',
  },
} satisfies Record<string, Setting<unknown>>;
