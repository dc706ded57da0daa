import type { Connection } from 'ssh2';
import type { Login } from './login-limits.ts';
import { STOP_REASONS } from './session-events.ts';
import { onGlobalRequest } from './ssh-bind.ts';
import {
  type AgentListenerDeps,
  refuse,
  type SshConnectionContext,
} from './ssh-connection-context.ts';
import { onAuthentication } from './ssh-login.ts';
import { sessionChannels } from './ssh-shell.ts';

// One `ssh -R` agent connection, from login to its session's end: login (ssh-login.ts), its one
// bind (ssh-bind.ts), the shell's line (ssh-shell.ts); this file holds its lifetime.

export function serveAgent(
  client: Connection,
  peer: { ip: string; serverIp: string; userAgent: string },
  login: Login,
  deps: AgentListenerDeps,
): void {
  const ctx: SshConnectionContext = {
    client,
    peer,
    deps,
    credential: undefined,
    ipRefusal: undefined,
    refused: false,
    binding: false,
    bindChecked: Promise.resolve(),
    served: undefined,
    session: undefined,
    closeEndpoint: undefined,
    closed: false,
    stopReason: STOP_REASONS.clientClosed,
  };
  const { logger } = deps;
  client.on('authentication', (auth) => onAuthentication(ctx, login, auth));
  client.on('ready', () => {
    login.authenticated();
    if (ctx.ipRefusal === undefined) return;
    refuse(ctx, '', ctx.ipRefusal).catch((error: unknown) => {
      logger.error({ err: error }, 'agent refusal event failed');
    });
  });
  client.on('request', (accept, reject, name, info) =>
    onGlobalRequest(ctx, accept, reject, name, info),
  );
  client.on('session', sessionChannels(ctx));
  client.on('close', () => {
    ctx.closed = true;
    ctx.session?.end(ctx.stopReason).catch((error: unknown) => {
      logger.error({ err: error }, 'agent session stop event failed');
    });
  });
  client.on('error', (error: Error & { level?: string }) => {
    if (error.level === 'client-timeout') ctx.stopReason = STOP_REASONS.keepAlive;
    logger.debug({ err: error }, 'agent connection error');
  });
}
