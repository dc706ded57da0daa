import type { Caller } from '../../shared/caller.ts';
import { newId } from '../../shared/ids.ts';
import type { Db } from '../../store/db.ts';
import { appendToOutbox } from '../../store/outbox.ts';
import type { AgentCredential } from './authenticate.ts';

// agent_session_start.v0 and agent_session_stop.v0 (every field of the catalogue's table): audit
// events of the account that owns the credential, written to the outbox like any other audit
// event, so the relay delivers them through the same subscriptions and destinations.

/** What is known of a session when an event about it is written. */
export interface SessionFacts {
  id: string;
  credential: AgentCredential;
  agentIp: string;
  serverIp: string;
  region: string;
  /** The tunnel server's hostname (the service's own domain). */
  ingressHostname: string;
  /** The client's SSH version string, e.g. `SSH-2.0-OpenSSH_9.2p1 Debian-2`. */
  userAgent: string;
  /** The agent's own metadata (ngrok's); over SSH, which has none, the hostname it bound. */
  metadata: string;
  startedAt: Date;
  /** The protocol the agent came in by. */
  transport: 'ssh' | 'ngrok';
  /** What an ngrok agent says of itself (Auth); an SSH client says none of it. */
  agent?: { os: string; arch: string; version: string; hostname: string };
}

/** The most characters of agent-given text (its version string, a refused bind address) kept. */
const RECORDED_MAX = 255;
/** Control characters, and surrogates standing alone (in `u` mode a pair is one code point). */
const UNRECORDABLE = /[\p{Cc}\p{Cs}]/gu;

/**
 * What an agent sent, as it may be recorded: control characters and lone surrogates taken out
 * (the store refuses them, and they have no business in a log), at most RECORDED_MAX characters.
 */
export function recordable(text: string): string {
  return text.replace(UNRECORDABLE, '').slice(0, RECORDED_MAX);
}

/** True when an agent's text has what recordable() takes out (a name with it is refused). */
export function hasControlCharacters(text: string): boolean {
  return new RegExp(UNRECORDABLE.source, 'u').test(text);
}

/** Why a session ended, as its stop event's `error` says. */
export const STOP_REASONS = {
  clientClosed: 'the agent closed the connection',
  api: 'stopped through the API (POST /tunnel_sessions/{id}/stop)',
  credentialDeleted: 'its credential was deleted',
  shutdown: 'the server shut down',
  keepAlive: 'the agent stopped answering keep-alives',
  leaseLapsed: 'its instance could not renew it in the shared store in time',
} as const;

/** The catalogue's `transport` (SPEC.md): `muxado` for ngrok's agents and SDKs, `ssh` for `ssh -R`. */
const CATALOGUE_TRANSPORT = { ssh: 'ssh', ngrok: 'muxado' } as const;

/** The event's object: the catalogue's fields, nested at their dots. */
export function sessionObject(
  facts: SessionFacts,
  publicUrl: string,
  error: string,
  stoppedAt: Date | null,
) {
  return {
    session: { id: facts.id, uri: `${publicUrl}/tunnel_sessions/${facts.id}` },
    credential: {
      id: facts.credential.id,
      uri: `${publicUrl}/${facts.credential.kind}/${facts.credential.id}`,
    },
    agent_ip: facts.agentIp,
    ingress_server_ip: facts.serverIp,
    region: facts.region,
    ingress_hostname: facts.ingressHostname,
    user_agent: facts.userAgent,
    metadata: facts.metadata,
    // An SSH client does not say which system it runs on.
    os: facts.agent?.os ?? '',
    arch: facts.agent?.arch ?? '',
    transport: CATALOGUE_TRANSPORT[facts.transport],
    started_at: facts.startedAt.toISOString(),
    // SSH sessions do not expire: they last as long as the connection.
    expires_at: '',
    stopped_at: stoppedAt === null ? '' : stoppedAt.toISOString(),
    deprecated: { upcoming_minimum_version: '', upcoming_enforcement_date: '', message: '' },
    error,
  };
}

/** Writes one session event to the outbox and wakes the relay. */
export async function recordSessionEvent(
  deps: { db: Db; publicUrl: string; kick: () => void },
  event: { type: 'start' | 'stop'; facts: SessionFacts; error: string; principal?: Caller },
): Promise<void> {
  const now = new Date();
  const object = sessionObject(
    event.facts,
    deps.publicUrl,
    event.error,
    event.type === 'stop' ? now : null,
  );
  const principal = event.principal;
  await appendToOutbox(deps.db, {
    event_id: newId('ev'),
    event_type: `agent_session_${event.type}.v0`,
    event_timestamp: now.toISOString(),
    account_id: event.facts.credential.accountId,
    principal:
      principal === undefined
        ? null
        : { id: principal.keyId, uri: `${deps.publicUrl}/api_keys/${principal.keyId}` },
    object,
  });
  deps.kick();
}
