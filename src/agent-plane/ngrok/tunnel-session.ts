import type { Duplex } from 'node:stream';
import type { Caller } from '../../shared/caller.ts';
import { type LiveSession, TOO_MANY_STREAMS } from '../sessions/live-session.ts';
import { recordable, type SessionFacts } from '../sessions/session-events.ts';
import { sendAgentCommand } from './agent-commands.ts';
import type { Binding } from './bind.ts';
import { type ProxyHeader, STREAM_TYPES } from './messages.ts';
import type { MuxSession } from './muxado/session.ts';
import { openTyped } from './muxado/typed.ts';

// One bound tunnel of an ngrok agent as the edge sees it: a LiveSession whose streams are
// muxado Proxy streams (type 3: an i64 little-endian length, the JSON header naming the tunnel
// and the client, then the connection's bytes both ways). Ending it is the agent connection's
// business (agent-connection.ts): `end` is handed in.

/** ngrok's EdgeType of a tunnel's protocol: HTTPS edges for HTTP(S), TCP and TLS edges. */
const EDGE_TYPES = { http: '3', https: '3', tcp: '1', tls: '2' } as const;

/** The bytes that open a Proxy stream for `header`. */
export function proxyPreamble(header: ProxyHeader): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const length = Buffer.allocUnsafe(8);
  length.writeBigInt64LE(BigInt(json.length));
  return Buffer.concat([length, json]);
}

export function tunnelSession(deps: {
  mux: MuxSession;
  tunnelId: string;
  binding: Binding;
  facts: SessionFacts;
  /** MAX_CHANNELS_PER_SESSION: the edge connections one tunnel carries at once. */
  maxStreams: number;
  end: (session: LiveSession, reason: string, principal?: Caller) => Promise<void>;
  /** The Bind's ForwardsTo as sent: where the agent says it forwards (GET /tunnels shows it). */
  forwardsTo: unknown;
  /** What the agent declared at Auth of the commands it cannot run (undefined: it can). */
  unsupported: { restart: string | undefined; update: string | undefined };
}): LiveSession {
  const { mux, tunnelId, binding } = deps;
  let open = 0;
  const session: LiveSession = {
    facts: deps.facts,
    hostname: binding.endpoint,
    passthroughTls: binding.proto === 'tls',
    policy: binding.policy && {
      id: deps.facts.id,
      accountId: deps.facts.credential.accountId,
      url: binding.url,
      proto: binding.proto === 'http' ? 'http' : 'https',
      policy: binding.policy,
    },
    async openStream(client): Promise<Duplex> {
      if (open >= deps.maxStreams) {
        const error = new Error('the agent has too many requests open (MAX_CHANNELS_PER_SESSION)');
        throw Object.assign(error, { code: TOO_MANY_STREAMS });
      }
      const stream = openTyped(mux, STREAM_TYPES.proxy);
      open += 1;
      stream.once('close', () => {
        open -= 1;
      });
      stream.write(
        proxyPreamble({
          Id: tunnelId,
          ClientAddr: client.ip.includes(':')
            ? `[${client.ip}]:${client.port}`
            : `${client.ip}:${client.port}`,
          Proto: binding.proto,
          EdgeType: EDGE_TYPES[binding.proto],
          // TLS endpoints' bytes reach the agent as the client sent them.
          PassthroughTLS: binding.proto === 'tls',
        }),
      );
      return stream;
    },
    end: (reason, principal) => deps.end(session, reason, principal),
    tunnel: {
      proto: binding.proto,
      forwardsTo: typeof deps.forwardsTo === 'string' ? recordable(deps.forwardsTo) : '',
    },
    // The agent runs a command for all of its tunnels: it restarts or updates as a whole.
    command: (command) => sendAgentCommand(mux, command, deps.unsupported[command.name]),
  };
  return session;
}
