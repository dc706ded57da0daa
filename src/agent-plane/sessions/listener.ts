import type { AddressInfo } from 'node:net';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import ssh2, { type AuthContext, type Connection } from 'ssh2';
import type { Caller } from '../../shared/caller.ts';
import type { ConnectionLimits, Refusal } from '../../shared/http/connection-limits.ts';
import { newId } from '../../shared/ids.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { Db } from '../../store/db.ts';
import type { AgentFaceDeps } from './agent-face.ts';
import {
  type AgentCredential,
  credentialOfKey,
  credentialOfToken,
  signatureValid,
} from './authenticate.ts';
import { bindRefusal, sessionRegion, tcpBind } from './bind-policy.ts';
import { DISCONNECT_CODES, disconnectWith, refusalBytes } from './disconnect.ts';
import { hostKeyFingerprint, loadHostKey } from './host-key.ts';
import { type LiveSession, TOO_MANY_STREAMS } from './live-session.ts';
import { createLoginLimits, type Login } from './login-limits.ts';
import {
  hasControlCharacters,
  recordable,
  recordSessionEvent,
  type SessionFacts,
  STOP_REASONS,
} from './session-events.ts';
import { AGENT_CIPHERS } from './ssh-ciphers.ts';

// The agent listener (SSH_PORT): stock OpenSSH clients log in with an authtoken (as the user name
// or the password) or a registered public key, and `ssh -R <hostname>:80:localhost:<port>` binds
// an HTTP endpoint for <hostname>. Each connection carries at most one session (one hostname);
// every bind, refused or not, is an agent_session_start.v0, and its end an agent_session_stop.v0.
// Before a login, OpenSSH's limits apply (login-limits.ts); the listener holds MAX_CONNECTIONS.

export interface AgentListenerDeps extends AgentFaceDeps {
  /** Where refused channels are counted. */
  metrics: Metrics;
  /** MAX_CONNECTIONS of the listener, within the open-file limit. */
  connectionLimits: ConnectionLimits;
}

/** The running listener. */
export interface AgentListener {
  port: number;
  /** The host key's fingerprint (`SHA256:…`, as ssh shows it), for agents to check it by. */
  hostKeyFingerprint: string;
  /** Stops accepting and ends every live session with a stop event (server shutdown). */
  close(): Promise<void>;
}

/** The HTTP port an agent forwards for an HTTP endpoint (`-R <hostname>:80:…`). */
const HTTP_BIND_PORT = 80;
/** The server's SSH identification: `SSH-2.0-AgentIngress`. */
const IDENT = 'AgentIngress';
/** Session channels an agent may open on one connection (OpenSSH's MaxSessions); it needs one. */
export const MAX_SESSION_CHANNELS = 10;

/** What a connection refused before the handshake is told (SSH_DISCONNECT_TOO_MANY_CONNECTIONS). */
function refusalReason(why: Refusal, perListener: number): string {
  if (why === 'max_startups') {
    return 'too many unauthenticated connections (SSH_MAX_STARTUPS); retry shortly';
  }
  return why === 'max_connections'
    ? `too many connections: this listener holds ${perListener} (MAX_CONNECTIONS); retry shortly`
    : 'too many connections for the open-file limit; retry shortly';
}

/** Starts the listener on SSH_PORT with the host key from DATA_DIR. */
export async function startAgentListener(deps: AgentListenerDeps): Promise<AgentListener> {
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
  await new Promise<void>((resolve, reject) => {
    net.once('error', reject);
    net.listen(deps.config.sshPort, deps.config.host, () => resolve());
  });
  return {
    port: (net.address() as AddressInfo).port,
    hostKeyFingerprint: hostKeyFingerprint(hostKey),
    async close() {
      net.close();
      await Promise.all(deps.registry.all().map((session) => session.end(STOP_REASONS.shutdown)));
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** Finds the credential an agent presents; rejects with the methods it may try next. */
async function authenticate(ctx: AuthContext, db: Db): Promise<AgentCredential | undefined> {
  if (ctx.method === 'none') return credentialOfToken(db, ctx.username);
  if (ctx.method === 'password') return credentialOfToken(db, ctx.password);
  if (ctx.method !== 'publickey') return undefined;
  const credential = await credentialOfKey(db, ctx.key.data);
  if (credential === undefined || ctx.signature === undefined || ctx.blob === undefined) {
    return credential;
  }
  return signatureValid(ctx.key, ctx.blob, ctx.signature, ctx.hashAlgo) ? credential : undefined;
}

/** One agent connection, from login to its session's end. */
function serveAgent(
  client: Connection,
  peer: { ip: string; serverIp: string; userAgent: string },
  login: Login,
  deps: AgentListenerDeps,
): void {
  const { db, config, logger, registry } = deps;
  let credential: AgentCredential | undefined;
  let session: LiveSession | undefined;
  let ipRefusal: string | undefined;
  /** Set once the agent is being refused: nothing it asks for afterwards is granted. */
  let refused = false;
  /** Set by the first -R: a connection carries one endpoint. */
  let binding = false;
  /** Set once the connection has closed. */
  let closed = false;
  let stopReason: string = STOP_REASONS.clientClosed;
  /** Stops the session's TCP endpoint, when it has one. */
  let closeEndpoint: (() => Promise<void>) | undefined;
  /** The bind being checked, if any: a shell's line waits for its answer. */
  let bindChecked: Promise<unknown> = Promise.resolve();
  /** What the bound session serves, as a URL (`http://<hostname>`, `tcp://<host>:<port>`). */
  let served: string | undefined;
  const events = { db, publicUrl: config.publicUrl, kick: deps.kick };
  const facts = (hostname: string, region = ''): SessionFacts => ({
    id: newId('ts'),
    credential: credential!,
    agentIp: peer.ip,
    serverIp: peer.serverIp,
    region,
    ingressHostname: config.serviceDomain,
    userAgent: peer.userAgent,
    metadata: hostname,
    startedAt: new Date(),
    transport: 'ssh',
  });
  /** A failed start: its event, then the client is told why and disconnected. */
  const refuse = async (hostname: string, reason: string) => {
    refused = true;
    await recordSessionEvent(events, { type: 'start', facts: facts(hostname), error: reason });
    disconnectWith(client, reason);
  };

  client.on('authentication', (ctx) => {
    authenticate(ctx, db).then(
      async (found) => {
        // A public key query (no signature yet) is answered "go on" when the key is registered.
        if (found === undefined) {
          // The attempt one too many disconnects instead (Too many authentication failures).
          if (!login.failed(ctx.method)) ctx.reject(['publickey', 'password']);
          return;
        }
        credential = found;
        // The single call site of `agent` IP restrictions: a refused agent still logs in, so
        // that it can be told why before it is disconnected.
        const allowed = (await deps.ipAllowed?.(found.accountId, 'agent', peer.ip)) ?? true;
        if (!allowed) ipRefusal = `agents from ${peer.ip} are not allowed by an IP restriction`;
        ctx.accept();
      },
      (error: unknown) => {
        logger.error({ err: error }, 'agent authentication failed');
        ctx.reject();
      },
    );
  });

  client.on('ready', () => {
    login.authenticated();
    if (ipRefusal === undefined) return;
    refuse('', ipRefusal).catch((error: unknown) => {
      logger.error({ err: error }, 'agent refusal event failed');
    });
  });

  client.on('request', (accept, reject, name, info) => {
    if (name !== 'tcpip-forward') return accept?.();
    if (refused) return reject?.();
    const bind = info as { bindAddr: string; bindPort: number };
    bindChecked = bindSession(bind).catch((error: unknown) => {
      logger.error({ err: error }, 'agent bind failed');
      reject?.();
    });

    async function bindSession({ bindAddr, bindPort }: { bindAddr: string; bindPort: number }) {
      // One endpoint per connection: a further -R is refused (ssh warns; the first one stays).
      if (binding) return reject?.();
      binding = true;
      if (hasControlCharacters(bindAddr)) {
        return void (await refuse(recordable(bindAddr), 'the bind address has control characters'));
      }
      const bound = await (bindPort === HTTP_BIND_PORT ? httpBind : tcpEndpointBind)(
        bindAddr,
        bindPort,
      );
      if (bound === undefined) return;
      session = bound;
      served = `${bindPort === HTTP_BIND_PORT ? 'http' : 'tcp'}://${bound.hostname}`;
      accept?.();
      await recordSessionEvent(events, { type: 'start', facts: bound.facts, error: '' });
      // The agent may have gone while the bind was checked: its session ends at once.
      if (closed) await bound.end(stopReason);
    }

    /** `-R <hostname>:80:…`: an HTTP endpoint the edge routes to by Host. */
    async function httpBind(bindAddr: string, bindPort: number) {
      const hostname = bindAddr.toLowerCase();
      const refusal = await bindRefusal(db, config, credential!, hostname);
      if (refusal !== undefined) return void (await refuse(hostname, refusal));
      const region = await sessionRegion(db, credential!.accountId, hostname, config.regions);
      return claimed(liveSession(facts(hostname, region), hostname, bindAddr, bindPort));
    }

    /** `-R <port>:…` with a reserved address's port: a TCP endpoint listening on that port. */
    async function tcpEndpointBind(bindAddr: string, bindPort: number) {
      const bound = await tcpBind(db, credential!, bindAddr, bindPort);
      if ('refusal' in bound) return void (await refuse(`${bindAddr}:${bindPort}`, bound.refusal));
      if (deps.openTcp === undefined) {
        return void (await refuse(bound.addr, 'TCP endpoints are off on this server'));
      }
      const region = await sessionRegion(db, credential!.accountId, bound.addr, config.regions);
      const session = liveSession(facts(bound.addr, region), bound.addr, bindAddr, bindPort);
      const live = await claimed(session);
      if (live === undefined) return;
      try {
        const endpoint = await deps.openTcp(live, { host: bound.host, port: bindPort });
        closeEndpoint = () => endpoint.close();
        return live;
      } catch (error) {
        await registry.release(live);
        const reason = `port ${bindPort} cannot be listened on: ${(error as Error).message}`;
        return void (await refuse(bound.addr, reason));
      }
    }

    /** The session once the registry holds it (its endpoint free, the account under its limit). */
    async function claimed(live: LiveSession): Promise<LiveSession | undefined> {
      const taken = await registry.claim(live);
      if (taken === undefined) return live;
      await refuse(live.hostname, taken);
      return undefined;
    }
  });

  /** The session of a granted bind: channels to the agent, and its one stop event. */
  function liveSession(f: SessionFacts, hostname: string, bindAddr: string, bindPort: number) {
    let ended: Promise<void> | undefined;
    let channels = 0;
    const live: LiveSession = {
      facts: f,
      hostname,
      openStream(from) {
        if (channels >= config.maxChannelsPerSession) {
          const error = new Error(
            'the agent has too many requests open (MAX_CHANNELS_PER_SESSION)',
          );
          return Promise.reject(Object.assign(error, { code: TOO_MANY_STREAMS }));
        }
        return new Promise((resolve, reject) => {
          client.forwardOut(bindAddr, bindPort, from.ip, from.port, (error, channel) => {
            if (error) return reject(error);
            channels += 1;
            channel.once('close', () => {
              channels -= 1;
            });
            resolve(channel);
          });
        });
      },
      end(reason: string, principal?: Caller) {
        ended ??= (async () => {
          // The store may be away: the session ends here anyway, and its row lapses.
          await registry.release(live).catch((error: unknown) => {
            logger.warn({ err: error }, 'session release failed');
          });
          await closeEndpoint?.();
          await recordSessionEvent(events, { type: 'stop', facts: f, error: reason, principal });
          if (!closed) disconnectWith(client, `session ended: ${reason}`);
        })();
        return ended;
      },
    };
    return live;
  }

  // `ssh -R` without -N asks for a shell: it gets one line saying what is served, then nothing.
  // ssh may ask before the bind's checks are done: the line waits for them.
  // Other channels an agent might open (direct-tcpip, streamlocal, x11) ssh2 refuses itself.
  let sessionChannels = 0;
  client.on('session', (acceptSession, rejectSession) => {
    if (sessionChannels >= MAX_SESSION_CHANNELS) {
      deps.metrics.sshChannelsRefused.inc();
      return rejectSession();
    }
    sessionChannels += 1;
    const shell = acceptSession();
    shell.once('close', () => {
      sessionChannels -= 1;
    });
    shell.on('pty', (accept) => accept?.());
    shell.on('shell', (accept) => {
      const channel = accept();
      void bindChecked.then(() => {
        if (!closed)
          channel.write(`Agent Ingress: this connection serves ${served ?? 'nothing'}\r\n`);
      });
    });
  });
  client.on('close', () => {
    closed = true;
    session?.end(stopReason).catch((error: unknown) => {
      logger.error({ err: error }, 'agent session stop event failed');
    });
  });
  client.on('error', (error: Error & { level?: string }) => {
    if (error.level === 'client-timeout') stopReason = STOP_REASONS.keepAlive;
    logger.debug({ err: error }, 'agent connection error');
  });
}
