import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Peer } from './peer.ts';

// The fields that cross the edge, each way. Hop-by-hop fields describe one connection, so they
// stop at the edge both ways (RFC 9110 §7.6.1): Connection and every field it names,
// Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding (each hop is framed anew: an
// answer by Node's server; a request's field is kept, as request-head.ts chunks a body of
// unknown length again only when the field says so) and Upgrade except on an upgrade;
// Proxy-Authorization and Proxy-Authenticate too, as Go's ReverseProxy does: they are for a
// proxy, never for the agent's server or the client. The agent learns who asked from
// X-Forwarded-For (appended), -Host and -Proto (set), on plain requests and upgrades alike
// (docs/decisions.md#hop-by-hop).

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** The hop-by-hop names of a message whose Connection field says `connection`, lower-cased. */
function hopByHop(connection: string | string[] | undefined): Set<string> {
  if (connection === undefined) return HOP_BY_HOP;
  const named = [connection]
    .flat()
    .flatMap((value) => value.split(','))
    .map((name) => name.trim().toLowerCase());
  // `Connection: keep-alive`, on nearly every request and answer, names nothing new.
  if (named.every((name) => HOP_BY_HOP.has(name))) return HOP_BY_HOP;
  return new Set([...HOP_BY_HOP, ...named]);
}

/** Whether a message's fields ask for an upgrade (Upgrade, and Connection naming it). */
export function asksUpgrade(headers: IncomingMessage['headers']): boolean {
  return headers.upgrade !== undefined && hopByHop(headers.connection).has('upgrade');
}

/**
 * A request's end-to-end fields (and Upgrade, on an upgrade) for the next hop: the agent, or
 * the instance that owns its session.
 */
export function endToEndHeaders(
  headers: IncomingMessage['headers'],
  upgrade = false,
): OutgoingHttpHeaders {
  const hop = hopByHop(headers.connection);
  const kept: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!hop.has(name) || name === 'transfer-encoding') kept[name] = value;
  }
  if (upgrade) {
    kept.connection = 'upgrade';
    kept.upgrade = headers.upgrade;
  }
  return kept;
}

/**
 * The request's fields for the agent: its end-to-end fields with who asked. `host` is the name
 * the request was routed by.
 */
export function forwardedHeaders(
  request: IncomingMessage,
  host: string,
  { conn, tls }: Peer,
  upgrade = false,
  fields: IncomingMessage['headers'] = request.headers,
): OutgoingHttpHeaders {
  const headers = endToEndHeaders(fields, upgrade);
  const before = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = before === undefined ? conn.clientIp : `${before}, ${conn.clientIp}`;
  headers['x-forwarded-host'] = host;
  headers['x-forwarded-proto'] = tls === undefined ? 'http' : 'https';
  return headers;
}

/**
 * An answer's end-to-end fields, as a flat [name, value, …] list (names' case, order and
 * repeats kept); on an upgrade's 101, Upgrade too, with `Connection: Upgrade`.
 */
export function endToEndFields(rawHeaders: string[], upgrade = false): string[] {
  const connection: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === 'connection') connection.push(rawHeaders[i + 1]);
  }
  const hop = hopByHop(connection.length === 0 ? undefined : connection);
  const fields: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (!hop.has(name) || (upgrade && name === 'upgrade')) {
      fields.push(rawHeaders[i], rawHeaders[i + 1]);
    }
  }
  if (upgrade) fields.push('Connection', 'Upgrade');
  return fields;
}

/** An answer head for a raw socket (an upgrade's): the status line and `fields`. */
export function responseHead(answer: IncomingMessage, fields: string[]): string {
  const lines = [`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage ?? ''}`];
  for (let i = 0; i < fields.length; i += 2) lines.push(`${fields[i]}: ${fields[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}
