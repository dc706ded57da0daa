import { createServer, type Server as NetServer, type Socket } from 'node:net';
import ssh2 from 'ssh2';
import type { Refusal } from '../../shared/http/connection-limits.ts';
import { acceptOn, type EarlyListener } from '../../shared/net/early-listener.ts';
import { DISCONNECT_CODES, refusalBytes } from './disconnect.ts';
import { hostKeyFingerprint, loadHostKey } from './host-key.ts';
import { createLoginLimits, type Login } from './login-limits.ts';
import { recordable, STOP_REASONS } from './session-events.ts';
import { AGENT_CIPHERS, sshCryptoIsNative } from './ssh-ciphers.ts';
import { serveAgent } from './ssh-connection.ts';
import type { AgentListenerDeps } from './ssh-connection-context.ts';

// The agent listener (SSH_PORT): stock OpenSSH clients log in with an authtoken (as the user name
// or the password) or a registered public key, and `ssh -R <hostname>:80:localhost:<port>` binds
// an HTTP endpoint for <hostname>. Each connection carries at most one session (one hostname);
// every bind, refused or not, is an agent_session_start.v0, and its end an agent_session_stop.v0.
// Before a login, OpenSSH's limits apply (login-limits.ts); the listener holds MAX_CONNECTIONS.

export type { AgentListenerDeps } from './ssh-connection-context.ts';
export { MAX_SESSION_CHANNELS } from './ssh-shell.ts';

/** The running listener. */
export interface AgentListener {
  port: number;
  /** The host key's fingerprint (`SHA256:…`, as ssh shows it), for agents to check it by. */
  hostKeyFingerprint: string;
  /** Stops accepting and ends every live session with a stop event (server shutdown). */
  close(): Promise<void>;
}

/** The server's SSH identification: `SSH-2.0-AgentIngress`. */
const IDENT = 'AgentIngress';

/** What a connection refused before the handshake is told (SSH_DISCONNECT_TOO_MANY_CONNECTIONS). */
function refusalReason(why: Refusal, perListener: number): string {
  if (why === 'max_startups') {
    return 'too many unauthenticated connections (SSH_MAX_STARTUPS); retry shortly';
  }
  return why === 'max_connections'
    ? `too many connections: this listener holds ${perListener} (MAX_CONNECTIONS); retry shortly`
    : 'too many connections for the open-file limit; retry shortly';
}

/**
 * Starts the listener on SSH_PORT with the host key from DATA_DIR; on `early`, the port as the
 * process bound it at its start (main.ts), when given.
 */
export async function startAgentListener(
  deps: AgentListenerDeps & { early?: EarlyListener },
): Promise<AgentListener> {
  const hostKey = await loadHostKey(deps.config.dataDir);
  const ssh = new ssh2.Server({
    hostKeys: [hostKey],
    ident: IDENT,
    keepaliveInterval: deps.config.agentKeepAliveMs,
    keepaliveCountMax: 3,
    algorithms: { cipher: AGENT_CIPHERS },
  });
  const limits = deps.connectionLimits;
  const limit = limits.listener('ssh');
  const logins = createLoginLimits({
    graceMs: deps.config.sshLoginGraceMs,
    maxStartups: deps.config.sshMaxStartups,
    maxAuthTries: deps.config.sshMaxAuthTries,
    limit,
  });
  // Sockets are accepted here and handed to ssh2, so each connection's local address (the
  // ingress_server_ip of its events) is known (ssh2 reports only the remote one), and so is its
  // login from the first byte on.
  const accepted = new Map<string, { serverIp: string; login: Login }>();
  const sockets = new Set<Socket>();
  const net: NetServer = createServer((socket) => {
    const refusal = logins.refusesStartup() ? 'max_startups' : limit.admit(socket);
    if (refusal !== undefined) {
      const reason = refusalReason(refusal, limits.perListener);
      limits.turnAway(
        'ssh',
        socket,
        refusalBytes(IDENT, DISCONNECT_CODES.tooManyConnections, reason),
      );
      return;
    }
    const key = `${socket.remoteAddress}:${socket.remotePort}`;
    accepted.set(key, { serverIp: socket.localAddress ?? '', login: logins.start(socket) });
    sockets.add(socket);
    // Channels carry request/response traffic: Nagle's delay (with the peer's delayed ACK)
    // would add ~40 ms to every small write.
    socket.setNoDelay(true);
    socket.once('close', () => {
      accepted.delete(key);
      sockets.delete(socket);
    });
    ssh.injectSocket(socket);
  });
  ssh.on('connection', (client, info) => {
    const connection = accepted.get(`${info.ip}:${info.port}`);
    if (connection === undefined) return void client.end();
    connection.login.attach(client);
    const userAgent = recordable(info.header.identRaw);
    const peer = { ip: info.ip, serverIp: connection.serverIp, userAgent };
    serveAgent(client, peer, connection.login, deps);
  });
  ssh.on('error', (error: Error) => deps.logger.warn({ err: error }, 'agent listener error'));
  const accepting = await acceptOn(net, deps.early, deps.config.host, deps.config.sshPort);
  if (!sshCryptoIsNative()) {
    deps.logger.info(
      "SSH agents: ciphers in JavaScript, ssh2's native binding is not built (docs/agents.md, Ciphers)",
    );
  }
  return {
    port: accepting.port,
    hostKeyFingerprint: hostKeyFingerprint(hostKey),
    async close() {
      accepting.stop();
      await Promise.all(deps.registry.all().map((session) => session.end(STOP_REASONS.shutdown)));
      for (const socket of sockets) socket.destroy();
    },
  };
}
