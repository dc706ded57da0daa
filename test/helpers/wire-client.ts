import { type ClientHttp2Session, connect } from 'node:http2';
import { fromBinary } from '@bufbuild/protobuf';
import { codeToString } from '@connectrpc/connect/protocol-connect';
import { PublishResponseSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { TEST_INGEST_TOKEN } from './ingest-client.ts';

// A raw ingest client: sends exactly the bytes a test gives, in the framing of each protocol the
// service speaks, and reads the answer's code (and event ids on success) the way that protocol
// carries it. Connect-es's clients cannot send malformed frames; this one can.

/** How a request is framed: Connect unary, Connect streaming, gRPC-Web, gRPC (HTTP/2). */
export type Framing = 'connect' | 'connect-stream' | 'grpc-web' | 'grpc';

const CONTENT_TYPE: Record<Framing, string> = {
  connect: 'application/proto',
  'connect-stream': 'application/connect+proto',
  'grpc-web': 'application/grpc-web+proto',
  grpc: 'application/grpc+proto',
};

/** One raw call: the body as it goes on the wire (a message for `connect`, frames otherwise). */
export interface RawCall {
  framing: Framing;
  method: 'Publish' | 'PublishStream';
  body: Uint8Array;
  /** Extra headers, e.g. `grpc-encoding: gzip`; `authorization` defaults to the test token. */
  headers?: Record<string, string>;
}

/** What the service answered: `ok` or a Connect code name, its message, the acknowledged ids. */
export interface RawAnswer {
  code: string;
  message: string;
  eventIds: string[];
}

/** A length-prefixed message frame (gRPC, gRPC-Web, Connect streaming): flags, length, bytes. */
export function frame(message: Uint8Array, flags = 0): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

/** The frames of a body: [flags, payload] pairs, and the bytes after the last whole frame. */
function splitFrames(bytes: Buffer): { frames: [number, Buffer][]; rest: number } {
  const frames: [number, Buffer][] = [];
  let at = 0;
  while (at + 5 <= bytes.length) {
    const length = bytes.readUInt32BE(at + 1);
    if (at + 5 + length > bytes.length) break;
    frames.push([bytes[at], bytes.subarray(at + 5, at + 5 + length)]);
    at += 5 + length;
  }
  return { frames, rest: bytes.length - at };
}

function grpcAnswer(status: string | undefined, message: string | undefined, body: Buffer) {
  const code = status === undefined ? 'no grpc-status' : grpcCode(Number(status));
  const eventIds =
    code === 'ok'
      ? splitFrames(body)
          .frames.filter(([flags]) => flags === 0)
          .flatMap(([, payload]) => fromBinary(PublishResponseSchema, payload).eventIds)
      : [];
  return { code, message: decodeURIComponent(message ?? ''), eventIds };
}

function grpcCode(status: number): string {
  return status === 0 ? 'ok' : codeToString(status);
}

/** Reads a Connect, Connect streaming or gRPC-Web answer from a fetch response. */
async function fetchAnswer(framing: Framing, response: Response): Promise<RawAnswer> {
  const body = Buffer.from(await response.arrayBuffer());
  if (framing === 'connect') {
    if (response.status === 200) {
      return {
        code: 'ok',
        message: '',
        eventIds: fromBinary(PublishResponseSchema, body).eventIds,
      };
    }
    const error = JSON.parse(body.toString() || '{}');
    return {
      code: error.code ?? `http ${response.status}`,
      message: error.message ?? '',
      eventIds: [],
    };
  }
  if (response.status !== 200)
    return { code: `http ${response.status}`, message: '', eventIds: [] };
  const { frames } = splitFrames(body);
  if (framing === 'connect-stream') {
    const end = frames.find(([flags]) => flags === 0x02);
    if (end === undefined) return { code: 'no end-stream', message: '', eventIds: [] };
    const error = JSON.parse(end[1].toString()).error;
    if (error !== undefined)
      return { code: error.code, message: error.message ?? '', eventIds: [] };
    return grpcAnswer('0', '', body);
  }
  // gRPC-Web: the status is in the headers (trailers-only) or in the trailer frame (flag 0x80).
  const trailer = frames.find(([flags]) => flags === 0x80)?.[1].toString('latin1') ?? '';
  const field = (name: string) =>
    response.headers.get(name) ?? new RegExp(`^${name}:\\s*(.*?)\\r?$`, 'im').exec(trailer)?.[1];
  return grpcAnswer(field('grpc-status'), field('grpc-message'), body);
}

const sessions = new Map<string, ClientHttp2Session>();

function session(origin: string): ClientHttp2Session {
  let open = sessions.get(origin);
  if (open === undefined || open.closed || open.destroyed) {
    open = connect(origin);
    open.on('error', () => {});
    sessions.set(origin, open);
  }
  return open;
}

/** Closes the HTTP/2 connections gRPC calls opened. */
export function closeRawSessions(): void {
  for (const open of sessions.values()) open.close();
  sessions.clear();
}

function sendGrpc(origin: string, path: string, headers: Record<string, string>, body: Uint8Array) {
  return new Promise<RawAnswer>((resolve, reject) => {
    const stream = session(origin).request({
      ':method': 'POST',
      ':path': path,
      te: 'trailers',
      ...headers,
    });
    const chunks: Buffer[] = [];
    let head: Record<string, string | string[] | undefined> = {};
    stream.on('response', (h) => {
      head = h;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('trailers', (trailers) => {
      head = { ...head, ...trailers };
    });
    stream.on('error', reject);
    stream.on('close', () => {
      const one = (name: string) => {
        const value = head[name];
        return Array.isArray(value) ? value[0] : value;
      };
      resolve(grpcAnswer(one('grpc-status'), one('grpc-message'), Buffer.concat(chunks)));
    });
    stream.end(body);
  });
}

/** Sends one raw call and reads its answer; gRPC goes to `grpcUrl` over HTTP/2. */
export async function sendRaw(
  target: { url: string; grpcUrl?: string },
  call: RawCall,
): Promise<RawAnswer> {
  const path = `/agent_ingress.ingest.v0.IngestService/${call.method}`;
  const headers = {
    'content-type': CONTENT_TYPE[call.framing],
    authorization: `Bearer ${TEST_INGEST_TOKEN}`,
    ...call.headers,
  };
  if (call.framing === 'grpc') {
    if (target.grpcUrl === undefined) throw new Error('sendRaw: gRPC needs the service grpcUrl');
    return sendGrpc(target.grpcUrl, path, headers, call.body);
  }
  const response = await fetch(`${target.url}${path}`, {
    method: 'POST',
    headers,
    body: call.body as unknown as RequestInit['body'],
    signal: AbortSignal.timeout(20_000),
  });
  return fetchAnswer(call.framing, response);
}
