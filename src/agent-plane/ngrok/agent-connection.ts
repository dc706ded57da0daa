import type { TLSSocket } from 'node:tls';
import type { Caller } from '../../shared/caller.ts';
import { newId } from '../../shared/ids.ts';
import type { AgentFaceDeps } from '../sessions/agent-face.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import { recordSessionEvent, type SessionFacts, STOP_REASONS } from '../sessions/session-events.ts';
import { type AuthenticatedAgent, AuthRefusal, authenticate } from './auth.ts';
import { type Binding, checkBind } from './bind.ts';
import {
  type AuthRequest,
  type BindRequest,
  NGROK_ERRORS,
  NgrokRefusal,
  ngrokError,
  STREAM_TYPES,
} from './messages.ts';
import { echoHeartbeats, watchHeartbeats } from './muxado/heartbeat.ts';
import { DEFAULT_LIMITS, MuxSession } from './muxado/session.ts';
import type { MuxStream } from './muxado/stream.ts';
import { acceptTyped, HEARTBEAT_TYPE, openTyped } from './muxado/typed.ts';
import { answer, readJson } from './rpc.ts';
import { tunnelSession } from './tunnel-session.ts';

// One ngrok agent's connection, from its first stream to its last: a muxado session carrying
// its heartbeat, its RPCs (Auth once, then Bind and Unbind) and, from the server, one Proxy
// stream per edge connection. Each bound tunnel is a LiveSession in the registry, with its start
// and stop events; the connection's end ends them all.

/** How long an agent has to send Auth, and any stream to say its type, ms. */
const AUTH_TIMEOUT_MS = 30_000;
const TYPE_TIMEOUT_MS = 10_000;
/** The most bytes of one RPC request (a Bind with a traffic policy is the largest). */
const MAX_REQUEST_BYTES = 256 * 1024;
/** A refused agent is disconnected after this, once it could read why, ms. */
const REFUSED_LINGER_MS = 2_000;
/** Ids agents send back (ClientId, tunnel Id): kept when they look like ours. */
const AGENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Reasons the agent hears of by StopTunnel: the others end its connection or came from it. */
const TOLD_REASONS = new Set<string>([
  STOP_REASONS.api,
  STOP_REASONS.credentialDeleted,
  STOP_REASONS.leaseLapsed,
]);

/** What serving an agent connection needs: what every agent face needs. */
export type AgentConnectionDeps = AgentFaceDeps;

/** A live agent connection, as the listener holds it. */
export interface AgentConnection {
  /** Ends its tunnels with `reason` and the connection with GOAWAY. */
  close(reason: string): Promise<void>;
}

interface Tunnel {
  session: LiveSession;
  closeEndpoint?: () => Promise<void>;
  ended?: Promise<void>;
}

export function serveAgentConnection(
  socket: TLSSocket,
  deps: AgentConnectionDeps,
): AgentConnection {
  const { config, db, logger, registry } = deps;
  const mux = new MuxSession(socket, DEFAULT_LIMITS, 'server');
  const peer = {
    address: socket.remoteAddress ?? '',
    serverIp: socket.localAddress ?? '',
    serverName: typeof socket.servername === 'string' ? socket.servername : '',
  };
  const events = { db, publicUrl: config.publicUrl, kick: deps.kick };
  const tunnels = new Map<string, Tunnel>();
  let agent: AuthenticatedAgent | undefined;
  let authenticating = false;
  let heartbeats = false;
  let closed = false;
  let stopReason: string = STOP_REASONS.clientClosed;
  const watch = watchHeartbeats(() => {
    stopReason = STOP_REASONS.keepAlive;
    mux.close(0, "no heartbeat within the agent's interval and tolerance");
  });
  const authTimer = setTimeout(() => {
    if (agent === undefined) mux.close(0, `no Auth within ${AUTH_TIMEOUT_MS} ms`);
  }, AUTH_TIMEOUT_MS).unref();

  mux.on('stream', (stream) => {
    stream.on('error', (error) => logger.debug({ err: error }, 'ngrok agent stream failed'));
    dispatch(stream).catch((error: unknown) => {
      logger.warn({ err: error }, 'ngrok agent stream failed');
      stream.destroy();
    });
  });
  mux.on('close', (error) => {
    closed = true;
    watch.stop();
    clearTimeout(authTimer);
    if (error !== undefined) logger.debug({ err: error }, 'ngrok agent connection ended');
    for (const tunnel of tunnels.values()) {
      tunnel.session.end(stopReason).catch((e: unknown) => {
        logger.error({ err: e }, 'ngrok tunnel stop failed');
      });
    }
  });

  async function dispatch(stream: MuxStream): Promise<void> {
    const type = await acceptTyped(mux, stream, TYPE_TIMEOUT_MS);
    if (type === HEARTBEAT_TYPE && !heartbeats) {
      heartbeats = true;
      return echoHeartbeats(stream, () => watch.beat());
    }
    if (type === STREAM_TYPES.auth) return rpc(stream, onAuth);
    if (type === STREAM_TYPES.bind) return rpc(stream, onBind);
    if (type === STREAM_TYPES.unbind) return rpc(stream, onUnbind);
    // A second heartbeat, a labeled tunnel (ngrok's cloud edges), anything else: refused.
    stream.destroy();
  }

  /** One RPC: its request, the handler's answer or its refusal (ngrok-style), a half-close. */
  async function rpc<T>(stream: MuxStream, handler: (request: T) => Promise<object>) {
    const request = (await readJson(stream, {
      maxBytes: MAX_REQUEST_BYTES,
      timeoutMs: TYPE_TIMEOUT_MS,
    })) as T;
    try {
      answer(stream, await handler(request ?? ({} as T)));
    } catch (error) {
      if (error instanceof NgrokRefusal) return answer(stream, error.answer());
      logger.error({ err: error }, 'ngrok agent request failed');
      answer(stream, ngrokError('the server failed to handle the request; retry'));
    }
  }

  /** Ends the connection soon after a refusal: the agent reads why first. */
  function disconnectSoon() {
    setTimeout(() => mux.close(0, 'refused'), REFUSED_LINGER_MS).unref();
  }

  async function onAuth(request: AuthRequest): Promise<object> {
    if (agent !== undefined || authenticating)
      throw new NgrokRefusal('the agent is already authenticated');
    authenticating = true;
    try {
      agent = await authenticate(db, deps.ipAllowed, request, peer);
    } catch (error) {
      if (!(error instanceof AuthRefusal)) throw error;
      if (error.credential !== undefined) {
        await recordSessionEvent(events, {
          type: 'start',
          facts: { ...factsOf(undefined, ''), credential: error.credential },
          error: error.message,
        });
      }
      disconnectSoon();
      throw error;
    } finally {
      authenticating = false;
    }
    clearTimeout(authTimer);
    watch.setTiming(agent.heartbeat.intervalMs, agent.heartbeat.toleranceMs);
    const clientId = AGENT_ID.test(request.ClientId ?? '') ? request.ClientId! : newId('agt');
    return {
      Version: agent.version,
      ClientId: clientId,
      Extra: {
        Version: 'agent-ingress',
        Region: '',
        Cookie: '',
        AccountName: '',
        SessionDuration: 0,
        PlanName: '',
        Banner: '',
      },
    };
  }

  /** A session's facts (the agent authenticated, or refused with `credential` set after). */
  function factsOf(binding: Binding | undefined, region: string): SessionFacts {
    return {
      id: newId('ts'),
      credential: agent?.credential as SessionFacts['credential'],
      agentIp: peer.address,
      serverIp: peer.serverIp,
      region: binding?.region ?? region,
      ingressHostname: peer.serverName || config.serviceDomain,
      userAgent: agent?.userAgent ?? '',
      metadata: agent?.metadata ?? '',
      startedAt: new Date(),
      transport: 'ngrok',
      agent: agent && {
        os: agent.os,
        arch: agent.arch,
        version: agent.agentVersion,
        hostname: agent.hostname,
      },
    };
  }

  async function onBind(request: BindRequest): Promise<object> {
    if (agent === undefined) throw new NgrokRefusal('Auth first: the agent is not authenticated');
    const tunnelId = AGENT_ID.test(request.Id ?? '') ? request.Id! : newId('tn');
    if (tunnels.has(tunnelId)) throw new NgrokRefusal(`tunnel ${tunnelId} is already bound`);
    let binding: Binding;
    try {
      binding = await checkBind(db, config, agent.credential, request);
    } catch (error) {
      if (error instanceof NgrokRefusal) {
        await recordSessionEvent(events, {
          type: 'start',
          facts: factsOf(undefined, ''),
          error: error.message,
        });
      }
      throw error;
    }
    const facts = factsOf(binding, binding.region);
    const session = tunnelSession({
      mux,
      tunnelId,
      binding,
      facts,
      maxStreams: config.maxChannelsPerSession,
      end: endTunnel,
      forwardsTo: request.ForwardsTo,
      unsupported: agent.commandsUnsupported,
    });
    await claim(session, binding);
    const tunnel: Tunnel = { session };
    tunnels.set(tunnelId, tunnel);
    tunnelIds.set(session, tunnelId);
    if (binding.tcp !== undefined) await openEndpoint(tunnel, binding.tcp);
    await recordSessionEvent(events, { type: 'start', facts, error: '' });
    // The agent may have gone while the bind was checked: its tunnel ends at once.
    if (closed) await session.end(stopReason);
    return {
      Id: tunnelId,
      URL: binding.url,
      Proto: binding.proto,
      // Echoed as sent: ngrok's Rust client parses the answer's options strictly.
      Opts: request.Opts ?? {},
      Extra: { Token: '' },
    };
  }

  /** Records `session` in the registry, or refuses the bind (with its start event). */
  async function claim(session: LiveSession, binding: Binding): Promise<void> {
    const taken = await registry.claim(session);
    if (taken === undefined) return;
    await recordSessionEvent(events, { type: 'start', facts: session.facts, error: taken });
    const code = /MAX_SESSIONS_PER_ACCOUNT/.test(taken)
      ? NGROK_ERRORS.sessionLimit
      : NGROK_ERRORS.endpointOnline;
    throw new NgrokRefusal(`${binding.url}: ${taken}`, code);
  }

  /** Opens a TCP tunnel's endpoint; a port that cannot be listened on refuses the bind. */
  async function openEndpoint(tunnel: Tunnel, address: { host: string; port: number }) {
    const { session } = tunnel;
    try {
      if (deps.openTcp === undefined) throw new Error('TCP endpoints are off on this server');
      const endpoint = await deps.openTcp(session, address);
      tunnel.closeEndpoint = () => endpoint.close();
    } catch (error) {
      tunnels.delete(tunnelIds.get(session) ?? '');
      await registry.release(session);
      const reason = `port ${address.port} cannot be listened on: ${(error as Error).message}`;
      await recordSessionEvent(events, { type: 'start', facts: session.facts, error: reason });
      throw new NgrokRefusal(reason);
    }
  }

  async function onUnbind(request: { Id?: string }): Promise<object> {
    const tunnel = tunnels.get(request.Id ?? '');
    if (tunnel === undefined) throw new NgrokRefusal(`no tunnel ${request.Id ?? ''} is bound`);
    await tunnel.session.end(STOP_REASONS.clientClosed);
    return {};
  }

  const tunnelIds = new WeakMap<LiveSession, string>();

  /** Ends one tunnel once: its registry entry, endpoint and stop event; the agent is told. */
  function endTunnel(session: LiveSession, reason: string, principal?: Caller): Promise<void> {
    const id = tunnelIds.get(session) ?? '';
    const tunnel = tunnels.get(id);
    if (tunnel === undefined) return Promise.resolve();
    tunnel.ended ??= (async () => {
      tunnels.delete(id);
      // The store may be away: the tunnel ends here anyway, and its row lapses.
      await registry.release(session).catch((error: unknown) => {
        logger.warn({ err: error }, 'session release failed');
      });
      await tunnel.closeEndpoint?.();
      await recordSessionEvent(events, {
        type: 'stop',
        facts: session.facts,
        error: reason,
        principal,
      });
      if (!closed && TOLD_REASONS.has(reason)) stopTunnel(id, reason);
    })();
    return tunnel.ended;
  }

  /** StopTunnel (type 9): the agent closes that listener and shows `reason`. */
  function stopTunnel(id: string, reason: string) {
    try {
      const stream = openTyped(mux, STREAM_TYPES.stopTunnel);
      stream.on('error', () => {});
      stream.resume();
      stream.end(
        JSON.stringify({ Id: id, Message: `the tunnel was stopped: ${reason}`, ErrorCode: null }),
      );
    } catch (error) {
      logger.debug({ err: error }, 'StopTunnel could not be sent');
    }
  }

  return {
    async close(reason) {
      stopReason = reason;
      await Promise.all([...tunnels.values()].map((tunnel) => tunnel.session.end(reason)));
      mux.close(0, reason);
    },
  };
}
