import { constants, type ServerHttp2Stream } from 'node:http2';
import { fromBinary, toJsonString } from '@bufbuild/protobuf';
import { ConnectError } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import {
  codeToHttpStatus,
  endStreamFlag,
  endStreamToJson,
  errorToJsonBytes,
} from '@connectrpc/connect/protocol-connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import { trailerFlag, trailerSerialize } from '@connectrpc/connect/protocol-grpc-web';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublishResponseSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Wire } from './wire.ts';

// The answers of the ingest, in each protocol's framing (connect-es's own encoders): a
// PublishResponse (binary, as the worker encoded it) or an error.

const CONTENT_TYPES = {
  connect: ['application/proto', 'application/json'],
  'connect-stream': ['application/connect+proto', 'application/connect+json'],
  grpc: ['application/grpc+proto', 'application/grpc+json'],
  'grpc-web': ['application/grpc-web+proto', 'application/grpc-web+json'],
} as const;

function contentType(wire: Wire): string {
  return CONTENT_TYPES[wire.framing][wire.binary ? 0 : 1];
}

/** The response message as the request's codec writes it. */
function message(wire: Wire, response: Uint8Array): Uint8Array {
  if (wire.binary) return response;
  return Buffer.from(
    toJsonString(PublishResponseSchema, fromBinary(PublishResponseSchema, response)),
  );
}

function bytes(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** gRPC over HTTP/2: the message frame, then grpc-status in the HTTP trailers. */
function sendGrpc(reply: FastifyReply, body: Uint8Array | undefined, error?: ConnectError) {
  const raw = reply.hijack().raw;
  raw.writeHead(200, { 'content-type': reply.getHeader('content-type') as string });
  raw.addTrailers(Object.fromEntries(setTrailerStatus(new Headers(), error)));
  raw.end(body === undefined ? undefined : bytes(body));
  return reply;
}

/**
 * An answer given before the client finished sending. HTTP/1.1: the connection's lingering
 * close reads and drops the rest (src/shared/http/lingering-close.ts). HTTP/2 resets the stream (NO_ERROR)
 * once the answer's trailers are out, which tells the client to stop sending.
 */
function endUnread(request: FastifyRequest): void {
  const raw = request.raw;
  raw.on('error', () => {}); // a client that goes away meanwhile is no one's concern
  if (raw.httpVersionMajor < 2) return;
  const { stream } = raw as unknown as { stream: ServerHttp2Stream };
  stream.once('wantTrailers', () => setImmediate(() => stream.close(constants.NGHTTP2_NO_ERROR)));
}

/** Answers `outcome` (the binary PublishResponse, or the error) in the request's protocol. */
export function answer(
  request: FastifyRequest,
  reply: FastifyReply,
  wire: Wire,
  outcome: Uint8Array | ConnectError,
): FastifyReply {
  if (!request.raw.complete) endUnread(request);
  const error = outcome instanceof ConnectError ? outcome : undefined;
  const body = error === undefined ? message(wire, outcome as Uint8Array) : undefined;
  reply.header('content-type', contentType(wire));
  if (wire.framing === 'connect') {
    if (body !== undefined) return reply.code(200).send(bytes(body));
    return reply
      .code(codeToHttpStatus(error!.code))
      .header('content-type', 'application/json')
      .send(bytes(errorToJsonBytes(error!, {})));
  }
  const frame = body === undefined ? undefined : encodeEnvelope(0, body);
  if (wire.framing === 'grpc') return sendGrpc(reply, frame, error);
  const trailer =
    wire.framing === 'connect-stream'
      ? encodeEnvelope(
          endStreamFlag,
          Buffer.from(JSON.stringify(endStreamToJson(new Headers(), error, {}))),
        )
      : encodeEnvelope(trailerFlag, trailerSerialize(setTrailerStatus(new Headers(), error)));
  return reply.code(200).send(Buffer.concat(frame === undefined ? [trailer] : [frame, trailer]));
}
