import { Agent, type ClientRequest, type RequestOptions } from 'node:http';
import type { LiveSession } from '../sessions/registry.ts';
import { ChannelSocket, type OnFault } from './channel-socket.ts';

// An http.Agent whose connections are SSH channels to one agent: keep-alive pools channels, so
// consecutive requests reuse one (backend.connection_reused) instead of opening a channel each.
// A pooled channel is never handed out once its far end spoke or closed (channel-socket.ts);
// one idle longer than FREE_CHANNEL_IDLE_MS is closed first (docs/decisions.md#channel-pool).

/**
 * How long a channel waits in the pool: under the 5 s keep-alive of Node, Express, Fastify,
 * uvicorn and Apache, so the edge closes its side before the agent's server closes its own.
 * Servers that announce theirs (`Keep-Alive: timeout=N`) get N − 1 s when that is shorter.
 */
const FREE_CHANNEL_IDLE_MS = 4000;

/** A `createConnection` for http.request: a new channel to `session`, never pooled. */
export type ChannelConnector = NonNullable<RequestOptions['createConnection']>;

/** Where channels come from: one session, opened in the name of `origin`. */
interface ChannelSource {
  session: LiveSession;
  origin: { ip: string; port: number };
  onFault: OnFault;
}

/** Opens a channel of `source` as a socket for http. */
export function channelConnector({ session, origin, onFault }: ChannelSource): ChannelConnector {
  return (_options, done) => {
    session.openChannel(origin).then(
      (channel) => done(null, new ChannelSocket(channel, onFault)),
      (error: Error) => done(error, undefined as never),
    );
    return undefined;
  };
}

/** The pool of one session's channels. */
class ChannelAgent extends Agent {
  constructor(source: ChannelSource) {
    super({ keepAlive: true, maxFreeSockets: 16, timeout: FREE_CHANNEL_IDLE_MS });
    this.createConnection = channelConnector(source) as never;
    // Runs after Agent's own 'free' handler, which pooled the socket, gave it to a waiting
    // request or destroyed it.
    this.on('free', (socket: ChannelSocket, options: RequestOptions) => {
      const pooled = this.freeSockets[this.getName(options)] as unknown[] | undefined;
      if (pooled?.includes(socket)) socket.idle = true;
    });
  }

  override reuseSocket(socket: ChannelSocket, request: ClientRequest): void {
    socket.idle = false;
    super.reuseSocket(socket, request);
  }
}

const agents = new WeakMap<LiveSession, Agent>();

/**
 * The pool of channels to `session` (made on first use, dropped with the session). Pooled
 * channels outlive one client, so they name the edge itself as their originator.
 */
export function channelAgent(source: ChannelSource): Agent {
  let agent = agents.get(source.session);
  if (agent === undefined) {
    agent = new ChannelAgent(source);
    agents.set(source.session, agent);
  }
  return agent;
}
