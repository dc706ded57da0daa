import { Agent, type AgentOptions } from 'node:http';
import type { Duplex } from 'node:stream';
import type { LiveSession } from '../agents/registry.ts';

// An http.Agent whose connections are SSH channels to one agent: keep-alive pools channels, so
// consecutive requests reuse one (backend.connection_reused) instead of opening a channel each.

type ChannelSocket = Duplex & Record<string, unknown>;

/** The socket methods http calls on its connections, which an SSH channel lacks. */
function socketLike(channel: Duplex): ChannelSocket {
  const socket = channel as ChannelSocket;
  const self = () => socket;
  for (const name of ['setKeepAlive', 'setNoDelay', 'setTimeout', 'ref', 'unref']) {
    socket[name] ??= self;
  }
  return socket;
}

const agents = new WeakMap<LiveSession, Agent>();

/**
 * The pool of channels to `session` (made on first use, dropped with the session). Pooled
 * channels outlive one client, so they name the edge itself as their originator.
 */
export function channelAgent(session: LiveSession, origin: { ip: string; port: number }): Agent {
  let agent = agents.get(session);
  if (agent === undefined) {
    agent = new Agent({ keepAlive: true, maxFreeSockets: 16 } satisfies AgentOptions);
    agent.createConnection = (_options, done) => {
      session.openChannel(origin).then(
        (channel) => done?.(null, socketLike(channel) as never),
        (error: Error) => done?.(error, undefined as never),
      );
      return undefined as never;
    };
    agents.set(session, agent);
  }
  return agent;
}
