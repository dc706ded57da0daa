import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyReply } from 'fastify';

/** Sends a Connect unary error: the protocol's HTTP status for the code and its JSON body. */
export function sendConnectError(reply: FastifyReply, error: unknown): FastifyReply {
  const connectError = ConnectError.from(error, Code.Internal);
  return reply
    .code(codeToHttpStatus(connectError.code))
    .header('content-type', 'application/json')
    .send(Buffer.from(errorToJsonBytes(connectError, {})));
}

/** Sends a Connect unary success with a binary protobuf body. */
export function sendConnectProto(reply: FastifyReply, body: Uint8Array): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/proto')
    .send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}

/** Sends a Connect unary success with a JSON body (the request was JSON). */
export function sendConnectJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.code(200).header('content-type', 'application/json').send(json);
}
