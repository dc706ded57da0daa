import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { CompletedRequest, TlsFacts } from './traffic-event.ts';

// What the edge reads of a client's connection and request head before routing it: the Host,
// the TLS session, and whether the certificate the client checked was this Host's.

/** Where a request came from: the client's connection, read on the instance it reached. */
export interface Peer {
  conn: CompletedRequest['conn'];
  tls: TlsFacts | undefined;
}

/** The Host header's name, lower-cased, without a port. */
export function hostOf(request: IncomingMessage): string {
  const host = (request.headers.host ?? '').toLowerCase();
  return host.startsWith('[') ? host : host.replace(/:\d+$/, '');
}

/** What the TLS session of a connection was (undefined over plain HTTP). */
function tlsFactsOf(socket: Socket): TlsFacts | undefined {
  const tls = socket as TLSSocket;
  if (tls.encrypted !== true) return undefined;
  // Empty unless the client sent one: the edge does not ask for client certificates.
  const peer = tls.getPeerCertificate();
  return {
    version: tls.getProtocol() ?? '',
    cipherSuite: tls.getCipher()?.standardName ?? '',
    clientCert: peer?.serialNumber
      ? { serialNumber: peer.serialNumber, subjectCn: String(peer.subject?.CN ?? '') }
      : undefined,
  };
}

/** The client's connection as this instance sees it (read now: a closed socket forgets). */
export function peerOf(socket: Socket, host: string, startMs: number): Peer {
  return {
    conn: {
      clientIp: socket.remoteAddress ?? '',
      serverIp: socket.localAddress ?? '',
      serverName: host,
      serverPort: socket.localPort ?? 0,
      startMs,
    },
    tls: tlsFactsOf(socket),
  };
}

/**
 * The TLS server name of a connection whose certificate is not for `host` (421: the certificate
 * checked was another name's, maybe another account's); undefined when they agree or on HTTP.
 */
export function misdirectedFrom(socket: Socket, host: string): string | undefined {
  const tls = socket as TLSSocket;
  if (tls.encrypted !== true) return undefined;
  const sni = typeof tls.servername === 'string' ? tls.servername.toLowerCase() : '';
  return sni === host ? undefined : sni;
}
