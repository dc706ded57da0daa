import type { Connection } from 'ssh2';
import type { ConnectionLimits } from '../../shared/http/connection-limits.ts';
import { newId } from '../../shared/ids.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { AgentFaceDeps } from './agent-face.ts';
import type { AgentCredential } from './authenticate.ts';
import { disconnectWith } from './disconnect.ts';
import type { LiveSession } from './live-session.ts';
import { recordSessionEvent, type SessionFacts } from './session-events.ts';

// What the parts of one `ssh -R` connection share (ssh-login.ts, ssh-bind.ts, ssh-session.ts,
// ssh-shell.ts, ssh-connection.ts): the ssh2 connection, where it came from, its credential, its
// one session and whether (and why) it has ended.

export interface AgentListenerDeps extends AgentFaceDeps {
  /** Where refused channels are counted. */
  metrics: Metrics;
  /** MAX_CONNECTIONS of the listener, within the open-file limit. */
  connectionLimits: ConnectionLimits;
}

/** One connection's shared state. */
export interface SshConnectionContext {
  readonly client: Connection;
  readonly peer: { ip: string; serverIp: string; userAgent: string };
  readonly deps: AgentListenerDeps;
  credential: AgentCredential | undefined;
  /** Set by a refused IP restriction at login: the agent is told once it is ready. */
  ipRefusal: string | undefined;
  /** Set once the agent is being refused: nothing it asks for afterwards is granted. */
  refused: boolean;
  /** Set by the first -R: a connection carries one endpoint. */
  binding: boolean;
  /** The bind being checked, if any: a shell's line waits for its answer. */
  bindChecked: Promise<unknown>;
  /** What the bound session serves, as a URL (`http://<hostname>`, `tcp://<host>:<port>`). */
  served: string | undefined;
  /** The bound session, once the registry holds it. */
  session: LiveSession | undefined;
  /** Stops the session's TCP endpoint, when it has one. */
  closeEndpoint: (() => Promise<void>) | undefined;
  /** Set once the connection has closed. */
  closed: boolean;
  stopReason: string;
}

/** The session event writer's dependencies. */
export function eventDeps(ctx: SshConnectionContext) {
  const { db, config, kick } = ctx.deps;
  return { db, publicUrl: config.publicUrl, kick };
}

/** The facts of a session of this connection for `hostname`. */
export function sshFacts(ctx: SshConnectionContext, hostname: string, region = ''): SessionFacts {
  return {
    id: newId('ts'),
    credential: ctx.credential!,
    agentIp: ctx.peer.ip,
    serverIp: ctx.peer.serverIp,
    region,
    ingressHostname: ctx.deps.config.serviceDomain,
    userAgent: ctx.peer.userAgent,
    metadata: hostname,
    startedAt: new Date(),
    transport: 'ssh',
  };
}

/** A failed start: its event, then the client is told why and disconnected. */
export async function refuse(
  ctx: SshConnectionContext,
  hostname: string,
  reason: string,
): Promise<void> {
  ctx.refused = true;
  await recordSessionEvent(eventDeps(ctx), {
    type: 'start',
    facts: sshFacts(ctx, hostname),
    error: reason,
  });
  disconnectWith(ctx.client, reason);
}
