import { Code, ConnectError } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import {
  setTrailerStatus,
  trailerFlag,
  trailerSerialize,
} from '@connectrpc/connect/protocol-grpc-web';
import type { FastifyReply } from 'fastify';

// The answers of the Publish fast path, in each protocol's framing (connect-es's own encoders).

/** A Connect unary error: the protocol's HTTP status for the code and its JSON body. */
export function sendConnectError(reply: FastifyReply, error: unknown): FastifyReply {
  const connectError = ConnectError.from(error, Code.Internal);
  return reply
    .code(codeToHttpStatus(connectError.code))
    .header('content-type', 'application/json')
    .send(Buffer.from(errorToJsonBytes(connectError, {})));
}

/** A Connect unary success with a binary protobuf body. */
export function sendConnectProto(reply: FastifyReply, body: Uint8Array): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/proto')
    .send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}

/** A Connect unary success with a JSON body (the request was JSON). */
export function sendConnectJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.code(200).header('content-type', 'application/json').send(json);
}

function grpcWebTrailer(error: ConnectError | undefined): Uint8Array {
  return encodeEnvelope(trailerFlag, trailerSerialize(setTrailerStatus(new Headers(), error)));
}

/** A gRPC-Web unary success: the message frame, then the trailer frame with grpc-status 0. */
export function sendGrpcWeb(reply: FastifyReply, body: Uint8Array): FastifyReply {
  const frame = encodeEnvelope(0, body);
  return reply
    .code(200)
    .header('content-type', 'application/grpc-web+proto')
    .send(Buffer.concat([frame, grpcWebTrailer(undefined)]));
}

/** A gRPC-Web error: HTTP 200 and a trailer frame carrying the status. */
export function sendGrpcWebError(reply: FastifyReply, error: ConnectError): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/grpc-web+proto')
    .send(Buffer.from(grpcWebTrailer(error)));
}
