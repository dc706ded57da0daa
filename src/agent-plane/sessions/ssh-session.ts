import type { Caller } from '../../shared/caller.ts';
import { disconnectWith } from './disconnect.ts';
import { type LiveSession, TOO_MANY_STREAMS } from './live-session.ts';
import { recordSessionEvent, type SessionFacts } from './session-events.ts';
import { eventDeps, type SshConnectionContext } from './ssh-connection-context.ts';

// The session of a granted `ssh -R` bind as the edge sees it: each edge connection is a
// forwarded-tcpip channel to the agent (at most MAX_CHANNELS_PER_SESSION at once); its end
// releases the endpoint, writes the one stop event and disconnects the agent.

export function sshSession(
  ctx: SshConnectionContext,
  facts: SessionFacts,
  hostname: string,
  bind: { addr: string; port: number },
): LiveSession {
  const { client, deps } = ctx;
  let ended: Promise<void> | undefined;
  let channels = 0;
  const live: LiveSession = {
    facts,
    hostname,
    openStream(from) {
      if (channels >= deps.config.maxChannelsPerSession) {
        const error = new Error('the agent has too many requests open (MAX_CHANNELS_PER_SESSION)');
        return Promise.reject(Object.assign(error, { code: TOO_MANY_STREAMS }));
      }
      return new Promise((resolve, reject) => {
        client.forwardOut(bind.addr, bind.port, from.ip, from.port, (error, channel) => {
          if (error) return reject(error);
          channels += 1;
          channel.once('close', () => {
            channels -= 1;
          });
          resolve(channel);
        });
      });
    },
    end(reason: string, principal?: Caller) {
      ended ??= (async () => {
        // The store may be away: the session ends here anyway, and its row lapses.
        await deps.registry.release(live).catch((error: unknown) => {
          deps.logger.warn({ err: error }, 'session release failed');
        });
        await ctx.closeEndpoint?.();
        await recordSessionEvent(eventDeps(ctx), { type: 'stop', facts, error: reason, principal });
        if (!ctx.closed) disconnectWith(client, `session ended: ${reason}`);
      })();
      return ended;
    },
  };
  return live;
}
