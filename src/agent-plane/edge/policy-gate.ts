import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { pipeline, Readable, Transform } from 'node:stream';
import { createDeflate, createGzip } from 'node:zlib';
import {
  type Answer,
  appendValue,
  connectionValues,
  createExchange,
  type EndpointPolicy,
  type Exchange,
  endpointValues,
  type HeaderMap,
  headerMap,
  type PolicyServices,
  runPhase,
  withRequest,
  withResponse,
} from '../policy/index.ts';
import type { AgentAnswer } from './agent-answer.ts';
import { errorPage } from './edge-answers.ts';
import type { Responder } from './forward-request.ts';
import type { Peer } from './peer.ts';
import { validFieldValue } from './request-head.ts';

// Where the edge runs an endpoint's Traffic Policy: on_tcp_connect and on_http_request before a
// request goes to its agent (or instead of it), on_http_response on the agent's answer head, and
// the answer's compression. The edge's own code calls three functions: requestPhases,
// writeAnswer and responder.

/** The most of a body a policy reads whole (verify-webhook); past it the request is refused. */
export const MAX_POLICY_BODY = 1024 * 1024;

/** Node's headers of a header map (lists kept). */
export function toNodeHeaders(headers: HeaderMap): IncomingMessage['headers'] {
  const out: IncomingMessage['headers'] = {};
  for (const [name, values] of Object.entries(headers)) {
    out[name] = name === 'set-cookie' || values.length > 1 ? values : values[0];
  }
  return out;
}

/** Reads a request's body whole, once, up to MAX_POLICY_BODY (undefined beyond it). */
function bodyReader(request: IncomingMessage) {
  let read: Promise<Buffer | undefined> | undefined;
  const chunks: Buffer[] = [];
  const readBody = () => {
    read ??= new Promise((resolve) => {
      let size = 0;
      request.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_POLICY_BODY) chunks.push(chunk);
      });
      request.once('end', () =>
        resolve(size <= MAX_POLICY_BODY ? Buffer.concat(chunks) : undefined),
      );
      request.once('error', () => resolve(undefined));
      request.resume();
    });
    return read;
  };
  /** The body for the agent: what was read, or the request itself when nothing read it. */
  const forAgent = (): Readable | undefined =>
    read === undefined
      ? undefined
      : Readable.from(chunks.length === 0 ? [] : [Buffer.concat(chunks)]);
  return { readBody, forAgent };
}

/** The exchange of one request, after on_tcp_connect and on_http_request ran. */
export async function requestPhases(
  endpoint: EndpointPolicy,
  services: PolicyServices,
  request: IncomingMessage,
  host: string,
  peer: Peer,
  internalOnline?: (hostname: string) => boolean,
): Promise<{ x: Exchange; body: () => Readable | undefined }> {
  const scheme = peer.tls === undefined ? 'http' : 'https';
  const headers = headerMap(request.headers);
  const values = withRequest(
    connectionValues({
      clientIp: peer.conn.clientIp,
      clientPort: request.socket.remotePort ?? 0,
      serverIp: peer.conn.serverIp,
      serverPort: peer.conn.serverPort,
      startMs: peer.conn.startMs,
      tls: peer.tls,
      endpoint: { id: endpoint.id, url: endpoint.url, protocol: endpoint.proto },
    }),
    {
      method: request.method ?? 'GET',
      scheme,
      host,
      target: request.url ?? '/',
      httpVersion: request.httpVersion,
      headers,
    },
  );
  const x = createExchange({
    accountId: endpoint.accountId,
    endpointId: endpoint.id,
    values,
    services,
    request: {
      method: request.method ?? 'GET',
      target: request.url ?? '/',
      headers: { ...headers },
    },
  });
  const reader = bodyReader(request);
  x.readBody = reader.readBody;
  x.internalOnline = internalOnline;
  // on_tcp_connect runs with each request: the edge's connections are not per endpoint.
  if ((await runPhase(endpoint.policy, 'on_tcp_connect', x)) === 'continue') {
    x.phase = 'on_http_request';
    await runPhase(endpoint.policy, 'on_http_request', x);
  }
  return { x, body: reader.forAgent };
}

/**
 * The same request through a second endpoint's policy (forward-internal's target, or the agent
 * endpoint behind a cloud one): its own endpoint variables and counters, the request as the
 * first left it, one set of decisions; it forwards no further.
 */
export async function nextPhases(endpoint: EndpointPolicy, first: Exchange): Promise<Exchange> {
  const x: Exchange = {
    ...first,
    endpointId: endpoint.id,
    values: {
      ...first.values,
      endpoint: endpointValues({ id: endpoint.id, url: endpoint.url, protocol: endpoint.proto }),
    },
    forward: undefined,
    internalOnline: undefined,
  };
  if ((await runPhase(endpoint.policy, 'on_tcp_connect', x)) === 'continue') {
    x.phase = 'on_http_request';
    await runPhase(endpoint.policy, 'on_http_request', x);
  }
  return x;
}

/** Writes a policy's answer (custom-response, deny, redirect, a 401 or 429) to the client. */
export function writeAnswer(
  response: ServerResponse,
  answer: Answer,
  cookies: string[] = [],
): void {
  if (response.headersSent) return;
  if (!sendable(answer.headers) || !cookies.every(validFieldValue)) {
    return void unsendable(response);
  }
  const body = typeof answer.body === 'string' ? Buffer.from(answer.body) : answer.body;
  const headers: OutgoingHttpHeaders = { ...toNodeHeaders(answer.headers) };
  if (cookies.length > 0) headers['set-cookie'] = cookies;
  headers['content-length'] = body.length;
  // Set one by one, not through writeHead: the event reads them back (getHeaders).
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value!);
  response.writeHead(answer.statusCode);
  response.end(body);
}

/** Whether HTTP can carry every value of `headers` (a policy's may hold a CR or LF). */
function sendable(headers: HeaderMap): boolean {
  return Object.values(headers).every((values) => values.every(validFieldValue));
}

/**
 * The edge's answer when a policy made the head it would send one HTTP cannot carry: 502, as
 * for a request a policy made unsendable (forward-request.ts), instead of Node's throw.
 */
function unsendable(response: ServerResponse): void {
  errorPage(response, 502, 'The endpoint policy made an answer head that HTTP cannot carry.');
}

/** The first of the policy's algorithms the client accepts (q > 0), or undefined. */
export function negotiate(
  algorithms: readonly string[],
  acceptEncoding: string,
): string | undefined {
  const accepted = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    accepted.set(name, q === undefined ? 1 : Number(q.slice(2)) || 0);
  }
  return algorithms.find((a) => (accepted.get(a) ?? accepted.get('*') ?? 0) > 0);
}

/** Counts the bytes that pass. */
function counter(tally: { bytes: number }): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      tally.bytes += chunk.length;
      done(null, chunk);
    },
  });
}

/** One endpoint's policy and its exchange of the request. */
export interface PolicyRun {
  endpoint: EndpointPolicy;
  x: Exchange;
}

/** The response phases in order, nearest the agent first; the exchange that answers or last. */
async function responsePhases(runs: readonly PolicyRun[]): Promise<Exchange> {
  for (const { endpoint, x } of runs) {
    await runPhase(endpoint.policy, 'on_http_response', x);
    if (x.answer !== undefined) return x;
  }
  return runs.at(-1)!.x;
}

/**
 * The agent's answer through on_http_response and compress-response, to the client: `runs`
 * nearest the agent first (an agent endpoint's policy, then the cloud endpoint's, as ngrok).
 */
export function responder(runs: readonly PolicyRun[], request: IncomingMessage): Responder {
  return (answer, fields, response) => {
    // The body waits while on_http_response runs (a byte counter already made it flow).
    answer.pause();
    const headers: HeaderMap = {};
    for (let i = 0; i < fields.length; i += 2) {
      appendValue(headers, fields[i].toLowerCase(), fields[i + 1]);
    }
    const head = { statusCode: answer.statusCode!, headers };
    for (const { x } of runs) {
      x.response = head;
      withResponse(x.values, head);
    }
    responsePhases(runs).then(
      (x) =>
        send(
          { ...x, compress: runs.find((r) => r.x.compress)?.x.compress },
          answer,
          response,
          request,
        ),
      () => {
        answer.destroy();
        writeAnswer(response, {
          statusCode: 500,
          headers: {},
          body: 'The endpoint policy failed.\n',
        });
      },
    );
  };
}

function send(
  x: Exchange,
  answer: AgentAnswer,
  response: ServerResponse,
  request: IncomingMessage,
) {
  if (x.answer !== undefined) {
    answer.resume();
    return writeAnswer(response, x.answer, x.setCookies);
  }
  const { statusCode, headers } = x.response!;
  // A login action's renewed session cookie rides on the upstream's answer.
  if (x.setCookies.length > 0)
    headers['set-cookie'] = [...(headers['set-cookie'] ?? []), ...x.setCookies];
  if (!sendable(headers)) {
    // Read off: the agent's connection goes back to the pool once its answer is whole.
    answer.resume();
    return unsendable(response);
  }
  const encoding =
    x.compress === undefined ||
    headers['content-encoding'] !== undefined ||
    statusCode === 204 ||
    statusCode === 304 ||
    request.method === 'HEAD'
      ? undefined
      : negotiate(x.compress, String(request.headers['accept-encoding'] ?? ''));
  if (encoding === undefined) {
    response.writeHead(statusCode, toNodeHeaders(headers));
    return void pipeline(answer, response, () => {});
  }
  delete headers['content-length'];
  headers['content-encoding'] = [encoding];
  headers.vary = [...(headers.vary ?? []), 'Accept-Encoding'];
  response.writeHead(statusCode, toNodeHeaders(headers));
  const raw = { bytes: 0 };
  const compressed = { bytes: 0 };
  const zip = encoding === 'gzip' ? createGzip() : createDeflate();
  pipeline(answer, counter(raw), zip, counter(compressed), response, () => {});
  response.once('finish', () => {
    x.decisions.compression = { algorithm: encoding, bytesSaved: raw.bytes - compressed.bytes };
  });
}
