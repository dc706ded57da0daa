import { bindRefusal, sessionRegion, tcpBind } from './bind-policy.ts';
import type { LiveSession } from './live-session.ts';
import { hasControlCharacters, recordable, recordSessionEvent } from './session-events.ts';
import {
  eventDeps,
  refuse,
  type SshConnectionContext,
  sshFacts,
} from './ssh-connection-context.ts';
import { sshSession } from './ssh-session.ts';

// `ssh -R`'s tcpip-forward request: `-R <hostname>:80:…` binds an HTTP endpoint the edge routes
// to by Host, `-R <port>:…` a TCP endpoint on one of the account's reserved addresses, by the
// rules every agent face shares (bind-policy.ts). One endpoint per connection; a refused bind is
// a failed start event and a disconnect saying why.

/** The HTTP port an agent forwards for an HTTP endpoint (`-R <hostname>:80:…`). */
const HTTP_BIND_PORT = 80;

type Bind = { bindAddr: string; bindPort: number };
/** ssh2's answers to a global request. */
type Accept = (() => void) | undefined;
type Reject = (() => void) | undefined;

/** Answers one global request of the connection (tcpip-forward binds; others are accepted). */
export function onGlobalRequest(
  ctx: SshConnectionContext,
  accept: Accept,
  reject: Reject,
  name: string,
  info: unknown,
): void {
  if (name !== 'tcpip-forward') return void accept?.();
  // A refused agent's forward gets no answer: a rejection would end `ssh -o
  // ExitOnForwardFailure=yes` before the disconnect that says why arrives.
  if (ctx.refused) return;
  ctx.bindChecked = bindSession(ctx, info as Bind, accept, reject).catch((error: unknown) => {
    ctx.deps.logger.error({ err: error }, 'agent bind failed');
    reject?.();
  });
}

async function bindSession(
  ctx: SshConnectionContext,
  { bindAddr, bindPort }: Bind,
  accept: Accept,
  reject: Reject,
): Promise<void> {
  // One endpoint per connection: a further -R is refused (ssh warns; the first one stays).
  if (ctx.binding) return reject?.();
  ctx.binding = true;
  if (hasControlCharacters(bindAddr)) {
    return refuse(ctx, recordable(bindAddr), 'the bind address has control characters');
  }
  const http = bindPort === HTTP_BIND_PORT;
  const bound = await (http ? httpBind : tcpEndpointBind)(ctx, bindAddr, bindPort);
  if (bound === undefined) return;
  ctx.session = bound;
  ctx.served = `${http ? 'http' : 'tcp'}://${bound.hostname}`;
  accept?.();
  await recordSessionEvent(eventDeps(ctx), { type: 'start', facts: bound.facts, error: '' });
  // The agent may have gone while the bind was checked: its session ends at once.
  if (ctx.closed) await bound.end(ctx.stopReason);
}

/** `-R <hostname>:80:…`: an HTTP endpoint the edge routes to by Host. */
async function httpBind(ctx: SshConnectionContext, bindAddr: string, bindPort: number) {
  const { db, config } = ctx.deps;
  const hostname = bindAddr.toLowerCase();
  const refusal = await bindRefusal(db, config, ctx.credential!, hostname);
  if (refusal !== undefined) return void (await refuse(ctx, hostname, refusal));
  const region = await sessionRegion(db, ctx.credential!.accountId, hostname, config.regions);
  const facts = sshFacts(ctx, hostname, region);
  return claimed(ctx, sshSession(ctx, facts, hostname, { addr: bindAddr, port: bindPort }));
}

/** `-R <port>:…` with a reserved address's port: a TCP endpoint listening on that port. */
async function tcpEndpointBind(ctx: SshConnectionContext, bindAddr: string, bindPort: number) {
  const { db, config, openTcp, registry } = ctx.deps;
  const bound = await tcpBind(db, ctx.credential!, bindAddr, bindPort);
  if ('refusal' in bound) return void (await refuse(ctx, `${bindAddr}:${bindPort}`, bound.refusal));
  if (openTcp === undefined) {
    return void (await refuse(ctx, bound.addr, 'TCP endpoints are off on this server'));
  }
  const region = await sessionRegion(db, ctx.credential!.accountId, bound.addr, config.regions);
  const facts = sshFacts(ctx, bound.addr, region);
  const bind = { addr: bindAddr, port: bindPort };
  const live = await claimed(ctx, sshSession(ctx, facts, bound.addr, bind));
  if (live === undefined) return;
  try {
    const endpoint = await openTcp(live, { host: bound.host, port: bindPort });
    ctx.closeEndpoint = () => endpoint.close();
    return live;
  } catch (error) {
    await registry.release(live);
    const reason = `port ${bindPort} cannot be listened on: ${(error as Error).message}`;
    return void (await refuse(ctx, bound.addr, reason));
  }
}

/** The session once the registry holds it (its endpoint free, the account under its limit). */
async function claimed(
  ctx: SshConnectionContext,
  live: LiveSession,
): Promise<LiveSession | undefined> {
  const taken = await ctx.deps.registry.claim(live);
  if (taken === undefined) return live;
  await refuse(ctx, live.hostname, taken);
  return undefined;
}
