import type { Caller } from '../../shared/caller.ts';
import type { LiveSession } from '../sessions/live-session.ts';
import { recordSessionEvent, STOP_REASONS } from '../sessions/session-events.ts';
import { checkBind } from './bind.ts';
import { agentId, type ConnectionContext, eventDeps, sessionFacts } from './connection-context.ts';
import { type BindRequest, NGROK_ERRORS, NgrokRefusal } from './messages.ts';
import { sendStopTunnel } from './stop-tunnel.ts';
import { tunnelSession } from './tunnel-session.ts';

// The tunnels of one agent connection: Bind checks a request (bind.ts), claims the endpoint in
// the registry and opens its TCP listener when it has one; Unbind and every other end (the API,
// the credential's deletion, the connection's end) go through one `end` that releases the
// endpoint, writes the stop event and tells the agent by StopTunnel when it did not ask.

/** Reasons the agent hears of by StopTunnel: the others end its connection or came from it. */
const TOLD_REASONS = new Set<string>([
  STOP_REASONS.api,
  STOP_REASONS.credentialDeleted,
  STOP_REASONS.leaseLapsed,
]);

/** How many assigned TCP ports a Bind tries when others claim them at the same moment. */
const ASSIGN_ATTEMPTS = 3;

interface Tunnel {
  id: string;
  session: LiveSession;
  closeEndpoint?: () => Promise<void>;
  ended?: Promise<void>;
}

/** Bind and Unbind handlers, and the end of every tunnel when the connection ends. */
export interface AgentTunnels {
  onBind(request: BindRequest): Promise<object>;
  onUnbind(request: { Id?: string }): Promise<object>;
  endAll(reason: string): Promise<void>;
}

export function agentTunnels(ctx: ConnectionContext): AgentTunnels {
  const { deps } = ctx;
  const tunnels = new Map<string, Tunnel>();
  const ofSession = new WeakMap<LiveSession, Tunnel>();
  const events = eventDeps(ctx);

  async function onBind(request: BindRequest): Promise<object> {
    if (ctx.agent === undefined)
      throw new NgrokRefusal('Auth first: the agent is not authenticated');
    const id = agentId(request.Id, 'tn');
    if (tunnels.has(id)) throw new NgrokRefusal(`tunnel ${id} is already bound`);
    const { binding, session } = await claimedTunnel(id, request);
    const tunnel: Tunnel = { id, session };
    tunnels.set(id, tunnel);
    ofSession.set(session, tunnel);
    if (binding.tcp !== undefined) await openEndpoint(tunnel, binding.tcp);
    await recordSessionEvent(events, { type: 'start', facts: session.facts, error: '' });
    // The agent may have gone while the bind was checked: its tunnel ends at once.
    if (ctx.closed) await session.end(ctx.stopReason);
    return {
      Id: id,
      URL: binding.url,
      Proto: binding.proto,
      // Echoed as sent: ngrok's Rust client parses the answer's options strictly.
      Opts: request.Opts ?? {},
      Extra: { Token: '' },
    };
  }

  /** A refused bind's start event. */
  function refusedStart(facts: LiveSession['facts'], reason: string): Promise<void> {
    return recordSessionEvent(events, { type: 'start', facts, error: reason });
  }

  /** The request's binding, checked, and its session once the registry holds it. */
  async function claimedTunnel(id: string, request: BindRequest) {
    for (let attempt = 1; ; attempt++) {
      const { credential } = ctx.agent!;
      const lastPort =
        attempt === 1 ? deps.assignedPorts?.get(credential.accountId, id) : undefined;
      const hints = { dialled: ctx.peer.serverName, lastPort };
      const binding = await checkBind(deps.db, deps.config, credential, request, hints).catch(
        async (error: unknown) => {
          if (error instanceof NgrokRefusal)
            await refusedStart(sessionFacts(ctx, ''), error.message);
          throw error;
        },
      );
      const session = tunnelSession({
        mux: ctx.mux,
        tunnelId: id,
        binding,
        facts: sessionFacts(ctx, binding.region),
        maxStreams: deps.config.maxChannelsPerSession,
        end: endTunnel,
        forwardsTo: request.ForwardsTo,
        unsupported: ctx.agent!.commandsUnsupported,
      });
      const taken = await deps.registry.claim(session);
      if (taken === undefined) {
        if (binding.assigned) deps.assignedPorts?.set(credential.accountId, id, binding.tcp!.port);
        return { binding, session };
      }
      const full = /MAX_SESSIONS_PER_ACCOUNT/.test(taken);
      // An assigned port another agent claimed in the meantime: another port, a few times.
      if (binding.assigned && !full && attempt < ASSIGN_ATTEMPTS) continue;
      await refusedStart(session.facts, taken);
      const code = full ? NGROK_ERRORS.sessionLimit : NGROK_ERRORS.endpointOnline;
      throw new NgrokRefusal(`${binding.url}: ${taken}`, code);
    }
  }

  /** Opens a TCP tunnel's endpoint; a port that cannot be listened on refuses the bind. */
  async function openEndpoint(tunnel: Tunnel, address: { host: string; port: number }) {
    try {
      if (deps.openTcp === undefined) throw new Error('TCP endpoints are off on this server');
      const endpoint = await deps.openTcp(tunnel.session, address);
      tunnel.closeEndpoint = () => endpoint.close();
    } catch (error) {
      tunnels.delete(tunnel.id);
      await deps.registry.release(tunnel.session);
      const refusal = new NgrokRefusal(
        `port ${address.port} cannot be listened on: ${(error as Error).message}`,
      );
      await refusedStart(tunnel.session.facts, refusal.message);
      throw refusal;
    }
  }

  async function onUnbind(request: { Id?: string }): Promise<object> {
    const tunnel = tunnels.get(request.Id ?? '');
    if (tunnel === undefined) throw new NgrokRefusal(`no tunnel ${request.Id ?? ''} is bound`);
    await tunnel.session.end(STOP_REASONS.clientClosed);
    return {};
  }

  /** Ends one tunnel once: its registry entry, endpoint and stop event; the agent is told. */
  function endTunnel(session: LiveSession, reason: string, principal?: Caller): Promise<void> {
    const tunnel = ofSession.get(session);
    if (tunnel?.ended !== undefined) return tunnel.ended;
    // Not bound (yet, or any more: its endpoint failed to open): nothing to end.
    if (tunnel === undefined || tunnels.get(tunnel.id) !== tunnel) return Promise.resolve();
    tunnel.ended = (async () => {
      tunnels.delete(tunnel.id);
      // The store may be away: the tunnel ends here anyway, and its row lapses.
      await deps.registry.release(session).catch((error: unknown) => {
        deps.logger.warn({ err: error }, 'session release failed');
      });
      await tunnel.closeEndpoint?.();
      await recordSessionEvent(events, {
        type: 'stop',
        facts: session.facts,
        error: reason,
        principal,
      });
      if (!ctx.closed && TOLD_REASONS.has(reason)) {
        sendStopTunnel(ctx.mux, tunnel.id, reason, deps.logger);
      }
    })();
    return tunnel.ended;
  }

  return {
    onBind,
    onUnbind,
    async endAll(reason) {
      await Promise.all([...tunnels.values()].map((tunnel) => tunnel.session.end(reason)));
    },
  };
}
