import type { Duplex } from 'node:stream';
import type { Caller } from '../auth/api-key-auth.ts';
import type { SessionFacts } from './session-events.ts';

// The live sessions of this instance, by id and by the hostname each one serves. A hostname has
// one live session: a second agent binding it is refused (the first keeps serving, so nobody can
// take over a name that is in use; a dead agent frees it when keep-alives give up on it).

/** The code of the error openChannel rejects with at MAX_CHANNELS_PER_SESSION (the edge's 503). */
export const TOO_MANY_CHANNELS = 'ETOOMANYCHANNELS';

/** One agent's live session, as the edge and the API see it. */
export interface LiveSession {
  facts: SessionFacts;
  /** The hostname it serves (HTTP). */
  hostname: string;
  /** Opens an SSH channel to the agent's forwarded port for one edge connection. */
  openChannel(client: { ip: string; port: number }): Promise<Duplex>;
  /** Ends the session (its SSH connection); the stop event carries `reason`. */
  end(reason: string, principal?: Caller): Promise<void>;
}

/** The registry of live sessions. */
export interface SessionRegistry {
  /** Adds a session, or says why it cannot be (its hostname taken, the account at its limit). */
  claim(session: LiveSession): string | undefined;
  release(session: LiveSession): void;
  byHost(hostname: string): LiveSession | undefined;
  /** The account's session `id`; undefined for another account's. */
  get(accountId: string, id: string): LiveSession | undefined;
  ofAccount(accountId: string): LiveSession[];
  all(): LiveSession[];
}

/** An empty registry allowing `maxPerAccount` sessions to each account. */
export function createSessionRegistry(maxPerAccount: number): SessionRegistry {
  const byId = new Map<string, LiveSession>();
  const byHost = new Map<string, LiveSession>();
  const ofAccount = (accountId: string) =>
    [...byId.values()].filter((s) => s.facts.credential.accountId === accountId);
  return {
    claim(session) {
      const holder = byHost.get(session.hostname);
      if (holder !== undefined) {
        return `"${session.hostname}" is already bound by session ${holder.facts.id}; stop it first`;
      }
      if (ofAccount(session.facts.credential.accountId).length >= maxPerAccount) {
        return `the account already has ${maxPerAccount} live sessions (MAX_SESSIONS_PER_ACCOUNT)`;
      }
      byId.set(session.facts.id, session);
      byHost.set(session.hostname, session);
      return undefined;
    },
    release(session) {
      if (byId.get(session.facts.id) !== session) return;
      byId.delete(session.facts.id);
      byHost.delete(session.hostname);
    },
    byHost: (hostname) => byHost.get(hostname),
    get(accountId, id) {
      const session = byId.get(id);
      return session?.facts.credential.accountId === accountId ? session : undefined;
    },
    ofAccount,
    all: () => [...byId.values()],
  };
}
