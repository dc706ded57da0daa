import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

// The edge's own answers, when it does not carry the agent's.

/**
 * The status a request's event reports when its client left before any answer (nginx's 499,
 * "client closed request"): nothing was returned, and 200 would say something was
 * (docs/decisions.md#client-closed).
 */
export const CLIENT_CLOSED_REQUEST = 499;

/** An agent's status the edge does not pass on (RFC 9110 §15: three digits, 100 to 599). */
export function invalidStatus(status: number | undefined): boolean {
  return status === undefined || status < 100 || status > 599;
}

/** A plain-text error page; a response already under way is cut instead. */
export function errorPage(response: ServerResponse, status: number, text: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  response.end(`${text}\n`);
}

/** The edge's own answer to an Upgrade it does not tunnel. */
export function refuseUpgrade(socket: Duplex, status: number, reason: string): void {
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}
