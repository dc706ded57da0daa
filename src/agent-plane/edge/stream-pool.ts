import { Agent, type ClientRequest, type RequestOptions } from 'node:http';
import type { StreamSource } from '../sessions/live-session.ts';
import { type OnFault, StreamSocket } from './stream-socket.ts';

// Step two of a request's way through the edge, "open a stream": an http.Agent whose
// connections are streams to one agent (whatever its protocol: a StreamSource). Keep-alive pools
// them, so consecutive requests reuse one (backend.connection_reused) instead of opening a
// stream each. A pooled stream is never handed out once its far end spoke or closed
// (stream-socket.ts); one idle longer than FREE_STREAM_IDLE_MS is closed first
// (docs/decisions.md#channel-pool).

/**
 * How long a stream waits in the pool: under the 5 s keep-alive of Node, Express, Fastify,
 * uvicorn and Apache, so the edge closes its side before the agent's server closes its own.
 * Servers that announce theirs (`Keep-Alive: timeout=N`) get N − 1 s when that is shorter.
 */
const FREE_STREAM_IDLE_MS = 4000;

/** A `createConnection` for http.request: a new stream to the agent, never pooled. */
export type StreamConnector = NonNullable<RequestOptions['createConnection']>;

/** Where a request's streams come from. */
export interface AgentStreams {
  /** The session's pool. */
  pool: Agent;
  /** A new stream outside the pool, for a retry or an upgrade. */
  fresh: StreamConnector;
}

/** Where streams come from: one session, opened in the name of `origin`. */
export interface StreamOrigin {
  source: StreamSource;
  origin: { ip: string; port: number };
  onFault: OnFault;
}

/** Opens a stream of `source` as a socket for http. */
export function streamConnector({ source, origin, onFault }: StreamOrigin): StreamConnector {
  return (_options, done) => {
    source.openStream(origin).then(
      (stream) => done(null, new StreamSocket(stream, onFault)),
      (error: Error) => done(error, undefined as never),
    );
    return undefined;
  };
}

/** The pool of one session's streams. */
class StreamPool extends Agent {
  constructor(origin: StreamOrigin) {
    super({ keepAlive: true, maxFreeSockets: 16, timeout: FREE_STREAM_IDLE_MS });
    this.createConnection = streamConnector(origin) as never;
    // Runs after Agent's own 'free' handler, which pooled the socket, gave it to a waiting
    // request or destroyed it.
    this.on('free', (socket: StreamSocket, options: RequestOptions) => {
      const pooled = this.freeSockets[this.getName(options)] as unknown[] | undefined;
      if (pooled?.includes(socket)) socket.idle = true;
    });
  }

  override reuseSocket(socket: StreamSocket, request: ClientRequest): void {
    socket.idle = false;
    super.reuseSocket(socket, request);
  }
}

const pools = new WeakMap<StreamSource, Agent>();

/**
 * The pool of streams to `origin.source` (made on first use, dropped with the session). Pooled
 * streams outlive one client, so they name the edge itself as their originator.
 */
export function streamPool(origin: StreamOrigin): Agent {
  let pool = pools.get(origin.source);
  if (pool === undefined) {
    pool = new StreamPool(origin);
    pools.set(origin.source, pool);
  }
  return pool;
}

/** The streams of `origin.source`: its pool, and fresh ones for retries and upgrades. */
export function agentStreams(origin: StreamOrigin): AgentStreams {
  return { pool: streamPool(origin), fresh: streamConnector(origin) };
}
