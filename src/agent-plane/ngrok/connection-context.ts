import { newId } from '../../shared/ids.ts';
import type { AgentFaceDeps } from '../sessions/agent-face.ts';
import type { SessionFacts } from '../sessions/session-events.ts';
import type { AssignedPorts } from './assigned-ports.ts';
import type { AuthenticatedAgent } from './auth.ts';
import type { MuxSession } from './muxado/session.ts';

// What the parts of one ngrok agent connection share (auth-phase.ts, agent-tunnels.ts,
// agent-connection.ts): its muxado session, where it came from, who authenticated on it, and
// whether (and why) it has ended.

/** What serving an agent connection needs: what every agent face needs, and the listener's
 * memory of assigned TCP ports. */
export type AgentConnectionDeps = AgentFaceDeps & { assignedPorts?: AssignedPorts };

/** One connection's shared state. */
export interface ConnectionContext {
  readonly mux: MuxSession;
  readonly deps: AgentConnectionDeps;
  /** The agent's address, ours, and the TLS server name it dialled. */
  readonly peer: { address: string; serverIp: string; serverName: string };
  /** Set by Auth. */
  agent: AuthenticatedAgent | undefined;
  /** Set once the muxado session has closed. */
  closed: boolean;
  /** Why the tunnels end when the connection does. */
  stopReason: string;
}

/** Ids agents send back (ClientId, tunnel Id): kept when they look like ours. */
const AGENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The id the agent sent when it looks like ours, else a new one with `prefix`. */
export function agentId(sent: string | undefined, prefix: string): string {
  return sent !== undefined && AGENT_ID.test(sent) ? sent : newId(prefix);
}

/** The session event writer's dependencies. */
export function eventDeps(ctx: ConnectionContext) {
  const { db, config, kick } = ctx.deps;
  return { db, publicUrl: config.publicUrl, kick };
}

/** A session's facts (the agent authenticated, or refused with `credential` set after). */
export function sessionFacts(ctx: ConnectionContext, region: string): SessionFacts {
  const { agent, peer } = ctx;
  return {
    id: newId('ts'),
    credential: agent?.credential as SessionFacts['credential'],
    agentIp: peer.address,
    serverIp: peer.serverIp,
    region,
    ingressHostname: peer.serverName || ctx.deps.config.serviceDomain,
    userAgent: agent?.userAgent ?? '',
    metadata: agent?.metadata ?? '',
    startedAt: new Date(),
    transport: 'ngrok',
    agent: agent && {
      os: agent.os,
      arch: agent.arch,
      version: agent.agentVersion,
      hostname: agent.hostname,
    },
  };
}
