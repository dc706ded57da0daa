import type { OutgoingHttpHeaders } from 'node:http';

// A request's head for the agent, as the bytes of one write, and how its body is framed. The
// framing is what Node's http client chose for the edge before (the agent's servers saw it so):
// a request's own Transfer-Encoding: chunked or Content-Length frames its body; a request with
// neither gets Content-Length: 0 when it has no body and its method usually has one (POST, PUT,
// PATCH...: some servers answer 411 without it), and is chunked when it has one. The head says
// `Connection: keep-alive` (servers that still speak HTTP/1.0 keep the stream open too), or
// `Connection: close` for a stream used once (a retry's, docs/decisions.md#edge-retry).

/** Methods whose requests carry no body unless their fields frame one (Node's list). */
const BODILESS_BY_DEFAULT = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/** A field value Node's http client refuses (a control character, CR or LF among them). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** A request target Node's http client refuses (a space or a control character). */
const INVALID_TARGET = /[^\u0021-\u00ff]/;

const CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;

/** What goes to the agent ahead of the body. */
export interface RequestHead {
  method: string;
  /** The path and query. */
  target: string;
  headers: OutgoingHttpHeaders;
}

/** How the body follows the head on the stream. */
export interface BodyFraming {
  /** Whether each chunk goes with its size (chunked transfer coding). */
  chunked: boolean;
  /** Whether the stream can carry another request after this one. */
  reusable: boolean;
}

/** A head's request line and fields, checked and written; its framing fields noted. */
export interface EncodedHead {
  method: string;
  text: string;
  /** Whether its fields frame a body: Content-Length, or a Transfer-Encoding. */
  framed: boolean;
  chunked: boolean;
}

/** Whether HTTP can carry `value` as a field's value: no CR, LF or other control character. */
export function validFieldValue(value: string): boolean {
  return !INVALID_VALUE.test(value);
}

/**
 * The request line and fields of `request`; throws, as Node's http client did, on a target or
 * a field value that would not stay one (a space, CR, LF or another control character).
 */
export function encodeHead({ method, target, headers }: RequestHead): EncodedHead {
  if (INVALID_TARGET.test(target)) {
    throw new TypeError('Request path contains unescaped characters');
  }
  let text = `${method} ${target} HTTP/1.1\r\n`;
  let framed = false;
  let chunked = false;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) {
      const line = String(one);
      if (!validFieldValue(line)) throw new TypeError(`Invalid character in header "${name}"`);
      text += `${name}: ${line}\r\n`;
    }
    const lower = name.toLowerCase();
    if (lower === 'content-length') framed = true;
    else if (lower === 'transfer-encoding') {
      framed = true;
      chunked = CHUNKED.test(String(value));
    }
  }
  return { method, text, framed, chunked };
}

/**
 * The head's bytes and its body's framing, once it is known whether a body comes (`hasBody`);
 * `keepAlive`: whether the stream is to carry more requests.
 */
export function finishHead(
  { method, text, framed, chunked }: EncodedHead,
  hasBody: boolean,
  keepAlive: boolean,
): { bytes: Buffer; framing: BodyFraming } {
  let head = text;
  const framing = { chunked, reusable: keepAlive };
  if (!framed) {
    if (!hasBody) {
      if (!BODILESS_BY_DEFAULT.has(method)) head += 'Content-Length: 0\r\n';
    } else if (BODILESS_BY_DEFAULT.has(method)) {
      // Nothing frames it: the body runs to the stream's end, which no other request may share.
      framing.reusable = false;
    } else {
      head += 'Transfer-Encoding: chunked\r\n';
      framing.chunked = true;
    }
  }
  head += keepAlive ? 'Connection: keep-alive\r\n\r\n' : 'Connection: close\r\n\r\n';
  return { bytes: Buffer.from(head, 'latin1'), framing };
}

const LAST_CHUNK = Buffer.from('0\r\n\r\n', 'latin1');
const CRLF = Buffer.from('\r\n', 'latin1');

/** A body chunk as it goes on the stream. */
export function frameChunk(chunk: Buffer, framing: BodyFraming): Buffer[] {
  if (!framing.chunked) return [chunk];
  return [Buffer.from(`${chunk.length.toString(16)}\r\n`, 'latin1'), chunk, CRLF];
}

/** What ends the body on the stream (nothing when its length was said). */
export function bodyEnd(framing: BodyFraming): Buffer | undefined {
  return framing.chunked ? LAST_CHUNK : undefined;
}
