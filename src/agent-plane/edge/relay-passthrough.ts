import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { LiveSession } from '../sessions/live-session.ts';
import { RELAY_HEADER, type RelayAuth } from './relay-auth.ts';
import { splice } from './splice.ts';

// A TLS endpoint's connection (tls-passthrough.ts) whose agent another instance holds travels
// as a raw byte stream: a signed Upgrade to the owner's INTERNAL_URL (TLS_PATH) carrying the
// client's connection facts; after the owner's 101 the bytes, the ClientHello first, go both
// ways unread. The owner serves it as a connection of its own TLS listener (IP restriction,
// tcp_connection_closed.v0), so the agent's certificate answers the client.

/** The path the owner's relay listener takes passed-through connections on. */
export const TLS_PATH = '/relay/tls';
/** The Upgrade protocol of a relayed passthrough: raw TLS bytes. */
const PROTOCOL = 'agent-ingress-tls';

/** The client's connection as the instance it reached saw it. */
export interface RawClient {
  ip: string;
  port: number;
  serverIp: string;
  serverPort: number;
}

/** Facts a relayed passthrough carries. */
export interface RelayedPassthrough {
  kind: 'tls';
  serverName: string;
  client: RawClient;
}

/** A passed-through connection's client, read from its socket. */
export function rawClientOf(socket: Socket): RawClient {
  return {
    ip: socket.remoteAddress ?? '',
    port: socket.remotePort ?? 0,
    serverIp: socket.localAddress ?? '',
    serverPort: socket.localPort ?? 0,
  };
}

/**
 * The relaying side: carries `socket` (its ClientHello unshifted, unread) to `owner`. A refusal
 * or an unreachable owner closes the connection: the name is a TLS endpoint, which this
 * instance cannot terminate.
 */
export function relayPassthrough(
  auth: RelayAuth,
  owner: { id: string; url: string },
  serverName: string,
  socket: Socket,
): void {
  const facts: RelayedPassthrough = { kind: 'tls', serverName, client: rawClientOf(socket) };
  const url = new URL(owner.url);
  const upstream = httpRequest({
    hostname: url.hostname,
    port: url.port || 80,
    path: TLS_PATH,
    headers: {
      connection: 'Upgrade',
      upgrade: PROTOCOL,
      [RELAY_HEADER]: auth.sign(owner.id, facts),
    },
  });
  upstream.on('upgrade', (_answer, ownerSocket, ownerHead) => {
    if (ownerHead.length > 0) socket.write(ownerHead);
    splice(socket, ownerSocket, () => {});
  });
  upstream.on('response', (answer) => {
    answer.resume();
    socket.destroy();
  });
  upstream.on('error', () => socket.destroy());
  socket.once('close', () => upstream.destroy());
  upstream.end();
}

/**
 * The owner's side: `serve`s the relayed connection when `session` is a TLS endpoint here
 * (after a 101; `head` holds the first bytes already read), else answers 404 and closes.
 */
export function acceptPassthrough(
  session: LiveSession | undefined,
  socket: Duplex,
  head: Buffer,
  serve: (session: LiveSession, socket: Socket) => void,
): void {
  if (session?.passthroughTls !== true) {
    socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    return;
  }
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${PROTOCOL}\r\n\r\n`,
  );
  if (head.length > 0) socket.unshift(head);
  // An HTTP server's upgraded connection is its net.Socket.
  serve(session, socket as Socket);
}
