import {
  count,
  internalOrigin,
  maxStartups,
  ms,
  optional,
  optionalPort,
  regionAddresses,
  switchablePort,
} from './kinds.ts';
import { HOUR, type Setting } from './setting.ts';

/** The agent plane's settings: the SSH and ngrok agent listeners, sessions, the edge, DNS (settings.ts). */
export const AGENT_SETTINGS = {
  sshPort: {
    env: 'SSH_PORT',
    planes: ['agent'],
    kind: switchablePort(2222),
    meaning:
      'Port agents connect to over SSH (`ssh -R`); the host key is DATA_DIR/ssh_host_ed25519_key (0600, made on the first start).',
  },
  agentPort: {
    env: 'AGENT_PORT',
    planes: ['agent'],
    kind: switchablePort(4443),
    meaning:
      "Port ngrok's own agents and SDKs connect to over TLS (their server_addr / connect_url; 443 in production), see docs/agents.md.",
  },
  agentTlsCertFile: {
    env: 'AGENT_TLS_CERT_FILE',
    planes: ['agent'],
    kind: optional({ accepts: 'a PEM file', note: 'one made into DATA_DIR/agent-tls/' }),
    meaning:
      "The certificate (with AGENT_TLS_KEY_FILE) the agent listener presents for connect.<SERVICE_DOMAIN>, where unset a local CA's made into DATA_DIR/agent-tls/ serves (an Agent Ingress's names get its managed certificate).",
  },
  agentTlsKeyFile: {
    env: 'AGENT_TLS_KEY_FILE',
    planes: ['agent'],
    kind: optional({ accepts: 'a PEM file', note: 'none' }),
    meaning: 'The private key of AGENT_TLS_CERT_FILE (PEM).',
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
} satisfies Record<string, Setting<unknown>>;
