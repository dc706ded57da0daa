import type { TLSSocket } from 'node:tls';
import { STOP_REASONS } from '../sessions/session-events.ts';
import { agentTunnels } from './agent-tunnels.ts';
import { authPhase } from './auth-phase.ts';
import type { AgentConnectionDeps, ConnectionContext } from './connection-context.ts';
import { STREAM_TYPES } from './messages.ts';
import { echoHeartbeats, watchHeartbeats } from './muxado/heartbeat.ts';
import { DEFAULT_LIMITS, MuxSession } from './muxado/session.ts';
import type { MuxStream } from './muxado/stream.ts';
import { acceptTyped, HEARTBEAT_TYPE } from './muxado/typed.ts';
import { serveRpc } from './rpc.ts';

// One ngrok agent's connection, from its first stream to its last: a muxado session carrying
// its heartbeat, its RPCs (Auth once, auth-phase.ts; then Bind and Unbind, agent-tunnels.ts) and,
// from the server, one Proxy stream per edge connection (tunnel-session.ts). This file holds its
// lifetime: which stream goes where, the heartbeat watch, and the end of every tunnel with it.

export type { AgentConnectionDeps } from './connection-context.ts';

/** A live agent connection, as the listener holds it. */
export interface AgentConnection {
  /** Ends its tunnels with `reason` and the connection with GOAWAY. */
  close(reason: string): Promise<void>;
}

/** How long any stream has to say its type, ms. */
const TYPE_TIMEOUT_MS = 10_000;

export function serveAgentConnection(
  socket: TLSSocket,
  deps: AgentConnectionDeps,
): AgentConnection {
  const ctx: ConnectionContext = {
    mux: new MuxSession(socket, DEFAULT_LIMITS, 'server'),
    deps,
    peer: {
      address: socket.remoteAddress ?? '',
      serverIp: socket.localAddress ?? '',
      serverName: typeof socket.servername === 'string' ? socket.servername : '',
    },
    agent: undefined,
    closed: false,
    stopReason: STOP_REASONS.clientClosed,
  };
  const { mux } = ctx;
  const watch = watchHeartbeats(() => {
    ctx.stopReason = STOP_REASONS.keepAlive;
    mux.close(0, "no heartbeat within the agent's interval and tolerance");
  });
  const auth = authPhase(ctx, (timing) => watch.setTiming(timing.intervalMs, timing.toleranceMs));
  const tunnels = agentTunnels(ctx);
  const dispatch = streamDispatch(
    ctx,
    (stream) => echoHeartbeats(stream, () => watch.beat()),
    new Map<number, RpcHandler>([
      [STREAM_TYPES.auth, auth.onAuth],
      [STREAM_TYPES.bind, tunnels.onBind],
      [STREAM_TYPES.unbind, tunnels.onUnbind],
    ]),
  );

  mux.on('stream', dispatch);
  mux.on('close', (error) => {
    ctx.closed = true;
    watch.stop();
    auth.stop();
    if (error !== undefined) deps.logger.debug({ err: error }, 'ngrok agent connection ended');
    tunnels.endAll(ctx.stopReason).catch((e: unknown) => {
      deps.logger.error({ err: e }, 'ngrok tunnel stop failed');
    });
  });

  return {
    async close(reason) {
      ctx.stopReason = reason;
      await tunnels.endAll(reason);
      mux.close(0, reason);
    },
  };
}

/** The handler of one RPC stream type: its request in, its answer out. */
// biome-ignore lint/suspicious/noExplicitAny: each handler reads its own request type.
type RpcHandler = (request: any) => Promise<object>;

/** Routes each stream the agent opens by its type: the first heartbeat stream, the RPCs; any
 * other type, or a second heartbeat, is reset (labeled tunnels are ngrok's cloud edges'). */
function streamDispatch(
  ctx: ConnectionContext,
  heartbeat: (stream: MuxStream) => void,
  rpcs: Map<number, RpcHandler>,
) {
  const { logger } = ctx.deps;
  let heartbeats = false;
  async function route(stream: MuxStream): Promise<void> {
    const type = await acceptTyped(ctx.mux, stream, TYPE_TIMEOUT_MS);
    if (type === HEARTBEAT_TYPE && !heartbeats) {
      heartbeats = true;
      return heartbeat(stream);
    }
    const handler = rpcs.get(type);
    if (handler === undefined) return void stream.destroy();
    return serveRpc(stream, handler, logger);
  }
  return (stream: MuxStream) => {
    stream.on('error', (error) => logger.debug({ err: error }, 'ngrok agent stream failed'));
    route(stream).catch((error: unknown) => {
      logger.warn({ err: error }, 'ngrok agent stream failed');
      stream.destroy();
    });
  };
}
