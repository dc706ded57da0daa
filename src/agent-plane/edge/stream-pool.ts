import type { RequestOptions } from 'node:http';
import type { StreamSource } from '../sessions/live-session.ts';
import { AgentConnection } from './agent-connection.ts';
import { type OnFault, StreamSocket } from './stream-socket.ts';

// Step two of a request's way through the edge, "open a stream": the connections to one agent
// (whatever its protocol: a StreamSource), kept between requests so consecutive ones reuse one
// (backend.connection_reused) instead of opening a stream each. A pooled connection is never
// handed out once its far end spoke or closed (agent-connection.ts); one idle longer than
// FREE_STREAM_IDLE_MS, or than the agent's server said it keeps it, is closed first
// (docs/decisions.md#channel-pool).

/**
 * How long a stream waits in the pool: under the 5 s keep-alive of Node, Express, Fastify,
 * uvicorn and Apache, so the edge closes its side before the agent's server closes its own.
 * Servers that announce theirs (`Keep-Alive: timeout=N`) get N − 1 s when that is shorter.
 */
export const FREE_STREAM_IDLE_MS = 4000;

/** The most idle connections one session keeps. */
const MAX_FREE = 16;

/** How often idle connections past their time are closed (a take checks the time itself). */
const SWEEP_MS = 1000;

/** A `createConnection` for http.request: a new stream to the agent, never pooled (upgrades). */
export type StreamConnector = NonNullable<RequestOptions['createConnection']>;

/** Where a request's streams come from. */
export interface AgentStreams {
  /** The session's pool of connections for requests. */
  pool: ConnectionPool;
  /** A new stream outside the pool, for an upgrade. */
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

/** An idle connection and until when it may be handed out. */
interface Idle {
  connection: AgentConnection;
  until: number;
}

/** The connections of one session: idle ones, last in first out, and new ones. */
export class ConnectionPool {
  readonly #origin: StreamOrigin;
  #idle: Idle[] = [];
  #sweeper: NodeJS.Timeout | undefined;

  constructor(origin: StreamOrigin) {
    this.#origin = origin;
  }

  /** An idle connection still within its time, taken out of the pool; undefined if none. */
  take(): AgentConnection | undefined {
    const now = Date.now();
    for (let idle = this.#idle.pop(); idle !== undefined; idle = this.#idle.pop()) {
      const { connection } = idle;
      connection.onceClosed(undefined);
      if (idle.until > now && !connection.destroyed) {
        connection.idle = false;
        return connection;
      }
      connection.destroy();
    }
    return undefined;
  }

  /** A new connection to the agent (not yet pooled). */
  async open(): Promise<AgentConnection> {
    const { source, origin, onFault } = this.#origin;
    return new AgentConnection(await source.openStream(origin), onFault);
  }

  /** Keeps `connection` for up to `keepMs` for the next request; closes it when full. */
  put(connection: AgentConnection, keepMs: number): void {
    if (this.#idle.length >= MAX_FREE || keepMs <= 0) return void connection.destroy();
    connection.idle = true;
    const idle = { connection, until: Date.now() + keepMs };
    this.#idle.push(idle);
    connection.onceClosed(() => this.#drop(idle));
    this.#sweeper ??= setInterval(() => this.#sweep(), SWEEP_MS).unref();
  }

  #drop(idle: Idle): void {
    const at = this.#idle.indexOf(idle);
    if (at !== -1) this.#idle.splice(at, 1);
  }

  /** Closes the connections past their time; stops when none is left. */
  #sweep(): void {
    const now = Date.now();
    for (const idle of this.#idle.filter((i) => i.until <= now)) idle.connection.destroy();
    if (this.#idle.length === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }
}

const pools = new WeakMap<StreamSource, ConnectionPool>();

/**
 * The pool of connections to `origin.source` (made on first use, dropped with the session).
 * Pooled streams outlive one client, so they name the edge itself as their originator.
 */
export function streamPool(origin: StreamOrigin): ConnectionPool {
  let pool = pools.get(origin.source);
  if (pool === undefined) {
    pool = new ConnectionPool(origin);
    pools.set(origin.source, pool);
  }
  return pool;
}

/** The streams of `origin.source`: its pool, and fresh ones for upgrades. */
export function agentStreams(origin: StreamOrigin): AgentStreams {
  return { pool: streamPool(origin), fresh: streamConnector(origin) };
}
