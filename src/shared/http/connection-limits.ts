import { readFileSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import type { Config } from '../../config/load.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';

// How many client connections the process holds: MAX_CONNECTIONS on each listener, and all of
// them together within the open-file limit (RLIMIT_NOFILE), so that a flood of one listener
// never leaves the others without descriptors to accept with (docs/decisions.md#connection-limits).
// Each listener answers its refusals as its protocol allows; every refusal is counted here.

/** Descriptors kept for the process itself: the store's files, destinations, outgoing sockets. */
export const RESERVED_FILES = 256;
/** Refused connections that may read their answer at once; beyond, they are closed unanswered. */
export const LINGERING_MAX = 64;
/**
 * Of those, what one listener's may take: as with the connections, a flood of one port (silent
 * clients an HTTP refusal waits a second for) leaves the other ports' refusals at least half.
 */
export const LINGERING_PER_LISTENER = LINGERING_MAX / 2;
/** How long a refused connection may take to read its answer. */
const LINGER_MS = 1000;
/** A listener refusing connections says so at most this often (a flood would flood the log). */
const WARN_EVERY_MS = 60_000;

export type ListenerName =
  | 'api'
  | 'grpc'
  | 'edge_http'
  | 'edge_https'
  | 'tcp'
  | 'ssh'
  | 'agent'
  | 'dns_tcp';
/** Why a connection was refused when it arrived. */
export type Refusal = 'max_connections' | 'open_files' | 'max_startups';
/** Why an accepted connection was closed. */
export type Cutoff = 'login_grace' | 'auth_tries' | 'idle_timeout' | 'timeout';

/** One listener's count of connections (each TCP endpoint has its own). */
export interface ListenerLimit {
  readonly name: ListenerName;
  /** Holds a place for `socket` until it closes; or says (and counts) why there is none. */
  admit(socket: Socket): Refusal | undefined;
  /** Counts a connection the listener refused by a rule of its own (MaxStartups). */
  refused(why: Refusal): void;
  /** Counts a connection the listener closed for a limit. */
  cut(why: Cutoff): void;
}

/** The process's connection limits. */
export interface ConnectionLimits {
  /** Each listener's cap: MAX_CONNECTIONS, or less when the open-file limit cannot hold it. */
  readonly perListener: number;
  /** A new count for one listener. */
  listener(name: ListenerName): ListenerLimit;
  /**
   * Ends a connection `listener` refused: `answer` is written at once, or after the client's
   * first bytes (HTTP clients read an answer only once they have sent a request); what the
   * client sends is read and dropped for a moment so that closing does not reset the answer
   * away. Without an answer, or with too many refused connections lingering already (in all, or
   * of this listener), it is closed at once.
   */
  turnAway(
    listener: ListenerName,
    socket: Socket,
    answer?: string | Buffer,
    when?: 'now' | 'after-data',
  ): void;
}

/** The process's open-file limit (soft) on Linux; undefined where it cannot be read. */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
  } catch {
    return undefined;
  }
}

/** The client listeners a start with `config` opens (TCP endpoints count as one). */
export function listenersOf(config: Config): ListenerName[] {
  const optional: [ListenerName, boolean][] = [
    ['grpc', config.grpcPort !== undefined],
    ['edge_http', config.edgeHttpPort !== undefined],
    ['edge_https', config.edgeHttpsPort !== undefined],
    ['ssh', config.sshPort !== undefined],
    ['agent', config.agentPort !== undefined],
    ['tcp', config.sshPort !== undefined || config.agentPort !== undefined],
    ['dns_tcp', config.dnsPort !== undefined],
  ];
  return ['api', ...optional.filter(([, on]) => on).map(([name]) => name)];
}

export interface ConnectionLimitsOptions {
  maxConnections: number;
  /** The listeners this process opens: the open-file limit is shared among them. */
  listeners: ListenerName[];
  /** RLIMIT_NOFILE (openFileLimit()); undefined: only MAX_CONNECTIONS applies. */
  openFiles: number | undefined;
  metrics: Metrics;
  logger: Logger;
}

/**
 * Sizes the caps: the listeners together hold at most the open-file limit less RESERVED_FILES
 * and LINGERING_MAX, and one listener at most half of that, so that the others keep the rest
 * while it is flooded. Warns when MAX_CONNECTIONS on every listener does not fit.
 */
export function createConnectionLimits(options: ConnectionLimitsOptions): ConnectionLimits {
  const { maxConnections, listeners, openFiles, metrics, logger } = options;
  const budget =
    openFiles === undefined
      ? Number.POSITIVE_INFINITY
      : Math.max(2, openFiles - RESERVED_FILES - LINGERING_MAX);
  const perListener = Math.min(maxConnections, Math.floor(budget / 2));
  if (maxConnections * listeners.length > budget) {
    logger.warn(
      {
        open_files: openFiles,
        max_connections: maxConnections,
        listeners,
        per_listener: perListener,
        open_files_needed: maxConnections * listeners.length + RESERVED_FILES + LINGERING_MAX,
      },
      `the open-file limit (${openFiles}) cannot hold MAX_CONNECTIONS on every listener: they ` +
        `share ${budget} connections, at most ${perListener} each; raise it (ulimit -n, LimitNOFILE)`,
    );
  }
  let held = 0;
  let lingering = 0;
  const lingeringOf = new Map<ListenerName, number>();

  function listener(name: ListenerName): ListenerLimit {
    let own = 0;
    let warnedAt = Number.NEGATIVE_INFINITY;
    let unreported = 0;
    const refused = (why: Refusal): Refusal => {
      metrics.connectionsRefused.inc({ listener: name, limit: why });
      unreported += 1;
      if (Date.now() - warnedAt < WARN_EVERY_MS) return why;
      logger.warn(
        { listener: name, limit: why, refused: unreported, max_connections: perListener },
        'refusing connections',
      );
      warnedAt = Date.now();
      unreported = 0;
      return why;
    };
    return {
      name,
      admit(socket) {
        if (own >= perListener) return refused('max_connections');
        if (held >= budget) return refused('open_files');
        own += 1;
        held += 1;
        socket.once('close', () => {
          own -= 1;
          held -= 1;
        });
        return undefined;
      },
      refused,
      cut(why) {
        metrics.connectionsCut.inc({ listener: name, limit: why });
      },
    };
  }

  function turnAway(
    listener: ListenerName,
    socket: Socket,
    answer?: string | Buffer,
    when: 'now' | 'after-data' = 'now',
  ) {
    socket.on('error', () => socket.destroy());
    const own = lingeringOf.get(listener) ?? 0;
    if (answer === undefined || lingering >= LINGERING_MAX || own >= LINGERING_PER_LISTENER) {
      socket.destroy();
      return;
    }
    lingering += 1;
    lingeringOf.set(listener, own + 1);
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once('close', () => {
      lingering -= 1;
      lingeringOf.set(listener, (lingeringOf.get(listener) ?? 1) - 1);
      clearTimeout(timer);
    });
    if (when === 'now') socket.end(answer);
    else socket.once('data', () => socket.end(answer));
    socket.once('end', () => socket.destroy());
    socket.resume();
  }

  return { perListener, listener, turnAway };
}

/**
 * Puts `limit` in front of a server whose own code (Node's HTTP, TLS or HTTP/2 server) handles
 * its connections: its 'connection' listeners, as registered now, see only admitted sockets;
 * `refuse` gets the others. Call it once every 'connection' listener is in place.
 */
export function capServer(
  server: Server,
  limit: ListenerLimit,
  refuse: (socket: Socket, why: Refusal) => void,
): void {
  const serve = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const why = limit.admit(socket);
    if (why !== undefined) return refuse(socket, why);
    for (const listener of serve) listener.call(server, socket);
  });
}
