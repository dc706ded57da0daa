import type { Caller } from '../../shared/caller.ts';
import { AppError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import type { Logger } from '../../shared/logger.ts';
import {
  claimSession,
  dropPredecessors,
  releaseSession,
  renewSessions,
  type SessionRow,
  sessionOfAccount,
} from '../../store/agent-sessions.ts';
import type { Db } from '../../store/db.ts';
import { sessionKey } from './internal-endpoints.ts';
import type { AgentCommand, LiveSession } from './live-session.ts';
import { STOP_REASONS } from './session-events.ts';

// The live sessions of this instance, by id and by the hostname each one serves, each also
// recorded in the store's session registry, which every instance sharing the store reads. An
// endpoint has one live session across instances: a second agent binding it is refused (the
// first keeps serving, so nobody can take over a name that is in use; a dead agent frees it when
// keep-alives give up on it, a crashed instance's sessions when their lease lapses).

/** The registry of live sessions. */
export interface SessionRegistry {
  /** This instance in the store: its random id and its INTERNAL_URL ('' without one). */
  readonly owner: { id: string; url: string };
  /** Adds a session, or says why it cannot be (its hostname taken, the account at its limit). */
  claim(session: LiveSession): Promise<string | undefined>;
  release(session: LiveSession): Promise<void>;
  /** This instance's session serving `hostname` (an internal one: endpointKey's key). */
  byHost(hostname: string): LiveSession | undefined;
  /** This instance's session `id` of the account; undefined for another account's. */
  get(accountId: string, id: string): LiveSession | undefined;
  all(): LiveSession[];
  /**
   * Ends the account's session `id` through the API, on this instance or on its owner; false
   * when no such session lives.
   */
  stop(accountId: string, id: string, principal: Caller): Promise<boolean>;
  /**
   * Sends `command` to the agent of the account's session `id`, on this instance or through its
   * owner; false when no such session lives; an AppError when the agent cannot or did not.
   */
  command(accountId: string, id: string, command: AgentCommand): Promise<boolean>;
  /**
   * Frees the endpoints of this instance's previous process (a crash) at once, rather than when
   * their leases lapse; called once this instance holds its INTERNAL_URL's port.
   */
  dropPredecessors(): Promise<number>;
  /** Stops renewing the leases (at shutdown, once the sessions have ended). */
  close(): void;
}

/** What the registry needs. */
export interface SessionRegistryDeps {
  db: Db;
  logger: Logger;
  maxPerAccount: number;
  /** How long a session counts without its owner renewing it, ms. */
  leaseMs: number;
  /** INTERNAL_URL, or '' when other instances cannot reach this one. */
  internalUrl: string;
  /** Asks the instance `owner` to stop its session; false when it has no such session. */
  stopElsewhere: (
    owner: { id: string; url: string },
    id: string,
    principal: Caller,
  ) => Promise<boolean>;
  /** Asks the instance `owner` to send `command` to its session's agent, as command() does. */
  commandElsewhere: (
    owner: { id: string; url: string },
    id: string,
    accountId: string,
    command: AgentCommand,
  ) => Promise<boolean>;
}

/** The command of a session whose protocol has none (ssh -R), refused. */
export function commandOf(session: LiveSession): NonNullable<LiveSession['command']> {
  if (session.command !== undefined) return session.command;
  return (command) =>
    Promise.reject(
      new AppError(
        'ERR_AGENT_COMMAND_UNSUPPORTED',
        `session ${session.facts.id} is an ${session.facts.transport === 'ssh' ? 'ssh -R' : session.facts.transport} session: its agent cannot be told to ${command.name}; only ngrok agents can`,
        { id: session.facts.id, command: command.name, transport: session.facts.transport },
      ),
    );
}

/** The store's row of a session this instance owns. */
function rowOf(session: LiveSession, owner: { id: string; url: string }): SessionRow {
  const { facts } = session;
  return {
    id: facts.id,
    account_id: facts.credential.accountId,
    endpoint: sessionKey(session),
    owner_id: owner.id,
    owner_url: owner.url,
    credential_id: facts.credential.id,
    credential_kind: facts.credential.kind,
    agent_ip: facts.agentIp,
    // An SSH client's version string is all it says of its version.
    agent_version: facts.agent?.version ?? facts.userAgent,
    region: facts.region,
    started_at: facts.startedAt,
    os: facts.agent?.os ?? '',
    arch: facts.agent?.arch ?? '',
    hostname: facts.agent?.hostname ?? '',
    metadata: facts.metadata,
    user_agent: facts.userAgent,
    transport: facts.transport,
    // An SSH session serves http://<hostname>, or tcp://<host:port> on a reserved address.
    proto: session.tunnel?.proto ?? (session.hostname.includes(':') ? 'tcp' : 'http'),
    forwards_to: session.tunnel?.forwardsTo ?? '',
  };
}

/** An empty registry; its leases are renewed every third of `leaseMs` until close(). */
export function createSessionRegistry(deps: SessionRegistryDeps): SessionRegistry {
  const { db, logger, maxPerAccount, leaseMs } = deps;
  const owner = { id: newId('inst'), url: deps.internalUrl };
  const byId = new Map<string, LiveSession>();
  const byHost = new Map<string, LiveSession>();

  /**
   * Renews this instance's leases; a session whose row is gone (its lease lapsed) ends, and so
   * does one whose credential another instance deleted.
   */
  async function renew(): Promise<void> {
    const { recorded, credentialGone } = await renewSessions(db, owner.id, leaseMs);
    for (const session of byId.values()) {
      const { id } = session.facts;
      if (!recorded.has(id)) void session.end(STOP_REASONS.leaseLapsed);
      else if (credentialGone.has(id)) void session.end(STOP_REASONS.credentialDeleted);
    }
  }
  const timer = setInterval(() => {
    renew().catch((error: unknown) => logger.warn({ err: error }, 'session lease renewal failed'));
  }, leaseMs / 3);
  timer.unref();

  const get = (accountId: string, id: string) => {
    const session = byId.get(id);
    return session?.facts.credential.accountId === accountId ? session : undefined;
  };

  /** The other instance that owns the account's session `id`; undefined when none does. */
  async function ownerOf(accountId: string, id: string, what: string) {
    const row = await sessionOfAccount(db, accountId, id);
    if (row === undefined || row.owner_id === owner.id) return undefined;
    if (row.owner_url === '') {
      throw new AppError(
        'ERR_UNAVAILABLE',
        `session ${id} is served by an instance without INTERNAL_URL; ${what} there`,
        { id },
      );
    }
    return { id: row.owner_id, url: row.owner_url };
  }

  return {
    owner,
    async claim(session) {
      const refused = await claimSession(db, rowOf(session, owner), { maxPerAccount, leaseMs });
      if (refused === undefined) {
        byId.set(session.facts.id, session);
        byHost.set(sessionKey(session), session);
        return undefined;
      }
      if ('full' in refused) {
        return `the account already has ${maxPerAccount} live sessions (MAX_SESSIONS_PER_ACCOUNT)`;
      }
      // Another account's session id is not this agent's business.
      if (refused.account !== session.facts.credential.accountId) {
        return `"${session.hostname}" is in use by another agent`;
      }
      return `"${session.hostname}" is already bound by session ${refused.holder}; stop it first`;
    },
    async release(session) {
      if (byId.get(session.facts.id) !== session) return;
      byId.delete(session.facts.id);
      byHost.delete(sessionKey(session));
      await releaseSession(db, session.facts.id, owner.id);
    },
    byHost: (hostname) => byHost.get(hostname),
    get,
    all: () => [...byId.values()],
    dropPredecessors: () => dropPredecessors(db, owner),
    async stop(accountId, id, principal) {
      const local = get(accountId, id);
      if (local !== undefined) {
        await local.end(STOP_REASONS.api, principal);
        return true;
      }
      const elsewhere = await ownerOf(accountId, id, 'stop it');
      return elsewhere !== undefined && deps.stopElsewhere(elsewhere, id, principal);
    },
    async command(accountId, id, command) {
      const local = get(accountId, id);
      if (local !== undefined) {
        await commandOf(local)(command);
        return true;
      }
      const elsewhere = await ownerOf(accountId, id, `send it the ${command.name} there`);
      return elsewhere !== undefined && deps.commandElsewhere(elsewhere, id, accountId, command);
    },
    close: () => clearInterval(timer),
  };
}
