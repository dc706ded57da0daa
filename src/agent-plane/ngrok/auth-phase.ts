import { recordSessionEvent } from '../sessions/session-events.ts';
import { AuthRefusal, authenticate } from './auth.ts';
import { agentId, type ConnectionContext, eventDeps, sessionFacts } from './connection-context.ts';
import { type AuthRequest, NgrokRefusal } from './messages.ts';

// The first RPC of a connection: Auth, once, within AUTH_TIMEOUT_MS of the handshake. A refused
// agent reads why (a refusal with a credential is a failed session start) and is disconnected
// shortly after; an accepted one sets the connection's agent and heartbeat timing.

/** How long an agent has to send Auth, ms. */
const AUTH_TIMEOUT_MS = 30_000;
/** A refused agent is disconnected after this, once it could read why, ms. */
const REFUSED_LINGER_MS = 2_000;

/** The Auth handler of one connection; `stop` clears its timer when the connection ends. */
export interface AuthPhase {
  onAuth(request: AuthRequest): Promise<object>;
  stop(): void;
}

export function authPhase(
  ctx: ConnectionContext,
  onAuthenticated: (timing: { intervalMs: number; toleranceMs: number }) => void,
): AuthPhase {
  const timer = setTimeout(() => {
    if (ctx.agent === undefined) ctx.mux.close(0, `no Auth within ${AUTH_TIMEOUT_MS} ms`);
  }, AUTH_TIMEOUT_MS).unref();
  let authenticating = false;

  async function onAuth(request: AuthRequest): Promise<object> {
    if (ctx.agent !== undefined || authenticating)
      throw new NgrokRefusal('the agent is already authenticated');
    authenticating = true;
    try {
      ctx.agent = await authenticate(ctx.deps.db, ctx.deps.ipAllowed, request, ctx.peer);
    } catch (error) {
      if (error instanceof AuthRefusal) await refused(error);
      throw error;
    } finally {
      authenticating = false;
    }
    clearTimeout(timer);
    onAuthenticated(ctx.agent.heartbeat);
    return {
      Version: ctx.agent.version,
      ClientId: agentId(request.ClientId, 'agt'),
      Extra: {
        Version: 'agent-ingress',
        Region: '',
        Cookie: '',
        AccountName: '',
        SessionDuration: 0,
        PlanName: '',
        Banner: '',
      },
    };
  }

  /** A refusal's start event (when the credential is known), then the disconnect, soon. */
  async function refused(error: AuthRefusal): Promise<void> {
    if (error.credential !== undefined) {
      await recordSessionEvent(eventDeps(ctx), {
        type: 'start',
        facts: { ...sessionFacts(ctx, ''), credential: error.credential },
        error: error.message,
      });
    }
    setTimeout(() => ctx.mux.close(0, 'refused'), REFUSED_LINGER_MS).unref();
  }

  return { onAuth, stop: () => clearTimeout(timer) };
}
