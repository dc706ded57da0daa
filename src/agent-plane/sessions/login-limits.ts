import type { Socket } from 'node:net';
import type { Connection } from 'ssh2';
import type { MaxStartups } from '../../config/load.ts';
import type { ListenerLimit } from '../../shared/http/connection-limits.ts';
import { DISCONNECT_CODES, disconnectWith } from './disconnect.ts';

// The agent listener's limits before a login, after OpenSSH's sshd: LoginGraceTime (a connection
// has SSH_LOGIN_GRACE_MS to authenticate), MaxStartups (beyond `start` unauthenticated
// connections a new one is refused at random, beyond `full` always) and MaxAuthTries
// (SSH_MAX_AUTH_TRIES failed attempts end the connection). See docs/decisions.md#ssh-login-limits.

/** How long a connection cut by a limit may take to read why before it is closed. */
const CUT_LINGER_MS = 1000;

/** One connection's login, from its accept to its authentication. */
export interface Login {
  /** The SSH connection, once ssh2 has read the client's identification. */
  attach(client: Connection): void;
  /** The client is authenticated: the grace ends, and it no longer counts as a startup. */
  authenticated(): void;
  /** Counts a rejected attempt; true when it was one too many (the client is disconnected). */
  failed(method: string): boolean;
}

export interface LoginLimits {
  /** Whether MaxStartups refuses a connection arriving now (counted). */
  refusesStartup(): boolean;
  /** Starts the login of an admitted connection. */
  start(socket: Socket): Login;
}

export interface LoginLimitsOptions {
  graceMs: number;
  maxStartups: MaxStartups;
  maxAuthTries: number;
  /** The SSH listener's count, where cut and refused connections are counted. */
  limit: ListenerLimit;
}

/**
 * sshd's random early drop: with `startups` unauthenticated connections open, a new one is
 * refused with probability `rate`% at `start`, rising linearly to 100% at `full`.
 */
export function dropsStartup(
  startups: number,
  { start, rate, full }: MaxStartups,
  random: () => number = Math.random,
): boolean {
  if (startups < start) return false;
  if (startups >= full) return true;
  const percent = rate + ((100 - rate) * (startups - start)) / (full - start);
  return random() * 100 < percent;
}

export function createLoginLimits(options: LoginLimitsOptions): LoginLimits {
  const { graceMs, maxStartups, maxAuthTries, limit } = options;
  let startups = 0;

  function start(socket: Socket): Login {
    let client: Connection | undefined;
    let pending = true;
    let attempts = 0;
    let failures = 0;
    startups += 1;
    const end = () => {
      if (!pending) return;
      pending = false;
      startups -= 1;
      clearTimeout(grace);
    };
    /** Tells the client why (once it speaks SSH), then closes whether or not it reads. */
    const cut = (why: 'login_grace' | 'auth_tries', reason: string, code: number) => {
      end();
      limit.cut(why);
      if (client === undefined) return void socket.destroy();
      disconnectWith(client, reason, code);
      const linger = setTimeout(() => socket.destroy(), CUT_LINGER_MS);
      socket.once('close', () => clearTimeout(linger));
    };
    const grace = setTimeout(
      () =>
        cut(
          'login_grace',
          `not authenticated within ${graceMs} ms (SSH_LOGIN_GRACE_MS)`,
          DISCONNECT_CODES.byApplication,
        ),
      graceMs,
    );
    socket.once('close', end);
    return {
      attach(connection) {
        client = connection;
      },
      authenticated: end,
      failed(method) {
        if (!pending) return true; // cut already: an attempt that came meanwhile goes unanswered
        attempts += 1;
        // As in sshd, a first "none" asks which methods there are: it is not a failure.
        if (method === 'none' && attempts === 1) return false;
        failures += 1;
        if (failures < maxAuthTries) return false;
        cut('auth_tries', 'Too many authentication failures', DISCONNECT_CODES.noMoreAuthMethods);
        return true;
      },
    };
  }

  return {
    refusesStartup() {
      if (!dropsStartup(startups, maxStartups)) return false;
      limit.refused('max_startups');
      return true;
    },
    start,
  };
}
