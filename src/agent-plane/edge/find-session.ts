import type { Logger } from '../../shared/logger.ts';
import { endpointKey, isInternalHostname } from '../sessions/internal-endpoints.ts';
import type { DecideEndpointIp } from '../sessions/ip-allowed.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import type { Peer } from './peer.ts';

// Step one of a request's way through the edge, "find the session": this instance's live
// session for the Host, and whether the client's address may reach it (`endpoints` IP
// restrictions); else the instance that owns the Host, through the relay.

/** Where a request for a Host goes. */
export type Route =
  /** This instance's session, and the client's ip_policy.decision (`allow`, `block`, `invalid`). */
  | { session: LiveSession; ipDecision: string }
  /** Relayed to the owner, which answers the client itself. */
  | { relayed: true }
  /** Nobody serves the Host (`why` for the 502), or a look-up failed (`failed`: 502/503). */
  | { missing: string; failed?: 'relay' | 'ip-check' };

export interface SessionFinder {
  /**
   * The route of a request for `host` from `peer`; `relay` carries the request elsewhere (it
   * answers the client itself when it returns true), absent for a request relayed here.
   */
  find(host: string, peer: Peer, relay?: (host: string) => Promise<boolean>): Promise<Route>;
  /** This instance's session of the account's internal endpoint `hostname` (forward-internal). */
  internal(accountId: string, hostname: string): LiveSession | undefined;
}

export function createSessionFinder(deps: {
  registry: SessionRegistry;
  endpointIp?: DecideEndpointIp;
  logger: Logger;
}): SessionFinder {
  const { registry, logger } = deps;

  /** ip_policy.decision: the one call site of `endpoints` IP restrictions. */
  async function admit(session: LiveSession, peer: Peer): Promise<string> {
    const { accountId } = session.facts.credential;
    return (await deps.endpointIp?.(accountId, peer.conn.clientIp)) ?? 'invalid';
  }

  return {
    internal: (accountId, hostname) =>
      isInternalHostname(hostname) ? registry.byHost(endpointKey(accountId, hostname)) : undefined,
    async find(host, peer, relay) {
      // Internal endpoints are reached only by forward-internal, never by Host or SNI.
      if (isInternalHostname(host)) return { missing: `No endpoint is online for ${host}.` };
      const session = registry.byHost(host);
      if (session === undefined) {
        try {
          if ((await relay?.(host)) === true) return { relayed: true };
          return { missing: `No agent is connected for ${host || 'this host'}.` };
        } catch (error) {
          logger.error({ err: error, host }, 'edge: relay look-up failed');
          return { missing: `The agent for ${host} cannot be looked up; retry.`, failed: 'relay' };
        }
      }
      if (session.passthroughTls === true) {
        return { missing: `${host} is a TLS endpoint: connect with TLS to the edge's TLS port.` };
      }
      try {
        return { session, ipDecision: await admit(session, peer) };
      } catch (error) {
        logger.error({ err: error }, 'edge: IP restriction check failed');
        return { missing: 'The IP restriction check failed; retry.', failed: 'ip-check' };
      }
    },
  };
}
