import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { fromBinary, fromJsonString, toBinary, toJsonString } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CLOSED_MID_REQUEST, closedMidRequest } from '../api/http-errors.ts';
import { bearerToken } from '../auth/tokens.ts';
import { AppError } from '../errors.ts';
import {
  PublishRequestSchema,
  PublishResponseSchema,
} from '../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Metrics } from '../metrics.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';
import {
  sendConnectError,
  sendConnectJson,
  sendConnectProto,
  sendGrpcWeb,
  sendGrpcWebError,
} from './wire-answers.ts';

// The fast path of Publish: Connect unary (binary or JSON, plain or gzip/br/deflate) and
// gRPC-Web unary without message compression. The request bytes go to a worker undecoded, and
// a body that is not a PublishRequest is INVALID_ARGUMENT (connect-es would answer INTERNAL).

/** What the fast path needs. */
export interface FastPublishDeps {
  pipeline: Pipeline;
  isIngestToken: (token: string) => boolean;
  metrics: Metrics;
  maxIngestBytes: number;
}

/** How a request is framed on the fast path, or undefined for connect-es to serve it. */
export type FastFormat = {
  protocol: 'connect-proto' | 'connect-json' | 'grpc-web';
  encoding: string;
};

const DECOMPRESS: Record<
  string,
  (data: Buffer, options: { maxOutputLength: number }) => Promise<Buffer>
> = {
  gzip: promisify(gunzip),
  br: promisify(brotliDecompress),
  deflate: promisify(inflate),
};

/** Which Publish requests the fast path serves. */
export function fastFormat(request: FastifyRequest): FastFormat | undefined {
  if (request.method !== 'POST') return undefined;
  const encoding = request.headers['content-encoding'] ?? 'identity';
  const type = request.headers['content-type']?.toLowerCase();
  if (encoding !== 'identity' && DECOMPRESS[encoding] === undefined) return undefined;
  if (type === 'application/proto') return { protocol: 'connect-proto', encoding };
  if (type === 'application/json' || type === 'application/json; charset=utf-8') {
    return { protocol: 'connect-json', encoding };
  }
  const messageEncoding = request.headers['grpc-encoding'] ?? 'identity';
  if (
    (type === 'application/grpc-web+proto' || type === 'application/grpc-web') &&
    encoding === 'identity' &&
    messageEncoding === 'identity'
  ) {
    return { protocol: 'grpc-web', encoding };
  }
  return undefined;
}

/** Reads a request body up to `limit` bytes; beyond it, RESOURCE_EXHAUSTED (the edge may split). */
function readBody(stream: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.removeAllListeners('data');
        stream.resume();
        reject(new ConnectError(`request larger than ${limit} bytes`, Code.ResourceExhausted));
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () =>
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)),
    );
    stream.once('error', reject);
  });
}

async function decompress(body: Buffer, encoding: string, limit: number): Promise<Buffer> {
  if (encoding === 'identity') return body;
  try {
    return await DECOMPRESS[encoding](body, { maxOutputLength: limit });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new ConnectError(
        `request larger than ${limit} bytes once decompressed`,
        Code.ResourceExhausted,
      );
    }
    throw new ConnectError(`request body is not valid ${encoding}`, Code.InvalidArgument);
  }
}

/** The one message of a gRPC-Web unary request: a 5-byte frame header, then the message. */
function grpcWebMessage(body: Buffer): Buffer {
  if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5 || (body[0] & 0x81) !== 0) {
    throw new ConnectError(
      'gRPC-Web request must be one uncompressed message frame',
      Code.InvalidArgument,
    );
  }
  return body.subarray(5);
}

function parseJson(body: Buffer): Buffer {
  try {
    return Buffer.from(
      toBinary(PublishRequestSchema, fromJsonString(PublishRequestSchema, body.toString('utf8'))),
    );
  } catch (error) {
    throw new ConnectError(
      `malformed PublishRequest JSON: ${(error as Error).message}`,
      Code.InvalidArgument,
    );
  }
}

/** Serves one Publish on the fast path. */
export async function fastPublish(
  request: FastifyRequest,
  reply: FastifyReply,
  format: FastFormat,
  deps: FastPublishDeps,
): Promise<FastifyReply> {
  try {
    const token = bearerToken(request.headers.authorization);
    if (token === undefined || !deps.isIngestToken(token)) {
      deps.metrics.ingestRequests.inc({ result: 'ERR_UNAUTHORIZED' });
      throw new ConnectError(
        'a valid ingest token is required: "Authorization: Bearer <token>"',
        Code.Unauthenticated,
      );
    }
    const raw = await readBody(request.raw, deps.maxIngestBytes);
    const body = await decompress(raw, format.encoding, deps.maxIngestBytes);
    const message =
      format.protocol === 'connect-json'
        ? parseJson(body)
        : format.protocol === 'grpc-web'
          ? grpcWebMessage(body)
          : body;
    const { response } = await deps.pipeline.publish(message, Date.now());
    if (format.protocol === 'connect-proto') return sendConnectProto(reply, response);
    if (format.protocol === 'grpc-web') return sendGrpcWeb(reply, response);
    return sendConnectJson(
      reply,
      toJsonString(PublishResponseSchema, fromBinary(PublishResponseSchema, response)),
    );
  } catch (error) {
    let connectError: ConnectError;
    if (error instanceof ConnectError) connectError = error;
    else {
      const appError = AppError.from(error);
      if (closedMidRequest(request.raw)) request.log.info(CLOSED_MID_REQUEST);
      else if (appError.status >= 500) request.log.error({ err: error }, 'publish failed');
      connectError = appError.toConnect();
    }
    return format.protocol === 'grpc-web'
      ? sendGrpcWebError(reply, connectError)
      : sendConnectError(reply, connectError);
  }
}
