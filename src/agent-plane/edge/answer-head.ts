import type { IncomingHttpHeaders } from 'node:http';

// An agent's answer head, read from the stream's bytes (RFC 9112 §4, §5): its status line and
// fields, names' case, order and repeats kept as they came (rawHeaders), and what frames the
// body that follows (§6.3). What the edge did with Node's http client before, without its
// parser's objects per answer.

/** The longest head the edge reads (Node's default --max-http-header-size). */
export const MAX_HEAD_BYTES = 16 * 1024;

const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Whitespace around a field's value (RFC 9110 §5.6.3: spaces and tabs only). */
const OWS = /^[ \t]+|[ \t]+$/g;

/** A field value Node's http would refuse to write to the client (a control character). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** One answer head, interim (1xx) or final. */
export interface AnswerHead {
  /** HTTP/1.0 or HTTP/1.1. */
  minor: 0 | 1;
  statusCode: number;
  statusMessage: string;
  /** [name, value, …] as they came. */
  rawHeaders: string[];
}

/** An answer whose bytes are not HTTP/1.1. */
export class AnswerParseError extends Error {
  readonly code = 'HPE_INVALID';
  constructor(reason: string) {
    super(`Parse Error: ${reason}`);
  }
}

/** The head in `bytes` (up to its blank line, `end` the offset after it). */
export function parseHead(bytes: Buffer, end: number): AnswerHead {
  const lines = bytes.toString('latin1', 0, end).split('\r\n');
  const status = STATUS_LINE.exec(lines[0]);
  if (status === null) throw new AnswerParseError('Invalid status line');
  const rawHeaders: string[] = [];
  // The last two lines are the blank line's halves.
  for (let i = 1; i < lines.length - 2; i++) {
    const line = lines[i];
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    const value = line.slice(colon + 1).replace(OWS, '');
    if (!FIELD_NAME.test(name) || INVALID_VALUE.test(value)) {
      throw new AnswerParseError('Invalid header field');
    }
    rawHeaders.push(name, value);
  }
  return {
    minor: status[1] === '1' ? 1 : 0,
    statusCode: Number(status[2]),
    statusMessage: status[3] ?? '',
    rawHeaders,
  };
}

/** The offset after the head's blank line in `bytes`, or -1 while it has not come. */
export function headEnd(bytes: Buffer): number {
  const at = bytes.indexOf('\r\n\r\n');
  return at === -1 ? -1 : at + 4;
}

/** How an answer's body is delimited on the stream (RFC 9112 §6.3). */
export type Framing =
  | { kind: 'none' }
  | { kind: 'length'; bytes: number }
  | { kind: 'chunked' }
  | { kind: 'close' };

/** The framing of the body after `head`, the answer to a `method` request. */
export function framingOf(head: AnswerHead, method: string): Framing {
  const { statusCode } = head;
  const interim = statusCode >= 100 && statusCode < 200;
  if (method === 'HEAD' || statusCode === 204 || statusCode === 304 || interim) {
    return { kind: 'none' };
  }
  const coding = fieldValues(head.rawHeaders, 'transfer-encoding');
  const length = fieldValues(head.rawHeaders, 'content-length');
  // Both say where the body ends: a sign of response splitting (RFC 9112 §6.1), refused as
  // Node's parser refuses it.
  if (coding.length > 0 && length.length > 0) {
    throw new AnswerParseError("Transfer-Encoding can't be present with Content-Length");
  }
  if (coding.length > 0) {
    const last = coding.join(',').split(',').at(-1)!.trim().toLowerCase();
    return last === 'chunked' ? { kind: 'chunked' } : { kind: 'close' };
  }
  if (length.length === 0) return { kind: 'close' };
  // Repeats must agree (a list of one value, as RFC 9110 §8.6 allows, or the same field twice).
  const values = new Set(
    length
      .join(',')
      .split(',')
      .map((v) => v.trim()),
  );
  const [only] = values;
  if (values.size !== 1 || !/^\d{1,15}$/.test(only)) {
    throw new AnswerParseError('Invalid Content-Length');
  }
  return { kind: 'length', bytes: Number(only) };
}

/** Whether the stream may carry another request after this answer (RFC 9112 §9.3). */
export function keepsAlive(head: AnswerHead): boolean {
  const tokens = fieldValues(head.rawHeaders, 'connection')
    .join(',')
    .toLowerCase()
    .split(',')
    .map((t) => t.trim());
  return head.minor === 1 ? !tokens.includes('close') : tokens.includes('keep-alive');
}

/**
 * How long the agent's server keeps the stream open when idle, by its `Keep-Alive: timeout=N`:
 * N − 1 s, so the edge closes first (as Node's http.Agent); undefined when it does not say.
 */
export function keepAliveMs(head: AnswerHead): number | undefined {
  const hint = /^timeout=(\d+)/.exec(fieldValues(head.rawHeaders, 'keep-alive')[0] ?? '');
  return hint === null ? undefined : Number(hint[1]) * 1000 - 1000;
}

/** The values of the fields named `name` (lower case), in order. */
function fieldValues(rawHeaders: string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].length === name.length && rawHeaders[i].toLowerCase() === name) {
      values.push(rawHeaders[i + 1]);
    }
  }
  return values;
}

/** Fields whose repeats Node's IncomingMessage drops (the first stays). */
const SINGLE = new Set([
  'content-type',
  'content-length',
  'user-agent',
  'referer',
  'host',
  'authorization',
  'proxy-authorization',
  'if-modified-since',
  'if-unmodified-since',
  'from',
  'location',
  'max-forwards',
  'retry-after',
  'etag',
  'last-modified',
  'server',
  'age',
  'expires',
]);

/** The fields as Node's IncomingMessage.headers has them (for the request's event). */
export function headersOf(rawHeaders: string[]): IncomingHttpHeaders {
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    const value = rawHeaders[i + 1];
    const before = headers[name];
    if (before === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
    else if (name === 'set-cookie') (before as string[]).push(value);
    else if (!SINGLE.has(name))
      headers[name] = `${before}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return headers;
}
