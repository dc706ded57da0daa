import type { IncomingMessage } from 'node:http';
import { fromBinary, fromJsonString, toBinary, toJsonString } from '@bufbuild/protobuf';
import { Code, ConnectError, createConnectRouter } from '@connectrpc/connect';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from '@connectrpc/connect-node';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../auth/tokens.ts';
import { AppError } from '../errors.ts';
import {
  IngestService,
  PublishRequestSchema,
  PublishResponseSchema,
} from '../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Metrics } from '../metrics.ts';
import { sendConnectError, sendConnectJson, sendConnectProto } from './connect-unary.ts';
import { type IngestDeps, ingestRoutes } from './ingest-service.ts';

const PUBLISH_PATH = `/${IngestService.typeName}/${IngestService.method.publish.name}`;

/** Options of the ingest endpoint. */
export interface IngestPluginOptions extends IngestDeps {
  maxIngestBytes: number;
  metrics: Metrics;
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

/**
 * The Connect unary Publish path (binary or JSON, uncompressed): the request bytes go straight to
 * a worker, which decodes them, so the ingest thread neither decodes nor re-encodes events, and
 * a body that is not a PublishRequest is INVALID_ARGUMENT (connect-es would say INTERNAL).
 */
async function fastPublish(
  request: FastifyRequest,
  reply: FastifyReply,
  options: IngestPluginOptions,
  json: boolean,
): Promise<FastifyReply> {
  try {
    const token = bearerToken(request.headers.authorization);
    if (token === undefined || !options.isIngestToken(token)) {
      options.metrics.ingestRequests.inc({ result: 'ERR_UNAUTHORIZED' });
      throw new ConnectError(
        'a valid ingest token is required: "Authorization: Bearer <token>"',
        Code.Unauthenticated,
      );
    }
    let body = await readBody(request.raw, options.maxIngestBytes);
    if (json) body = Buffer.from(toBinary(PublishRequestSchema, parseJson(body)));
    const published = await options.pipeline.publish(body, Date.now());
    if (!json) return sendConnectProto(reply, published.response);
    return sendConnectJson(
      reply,
      toJsonString(PublishResponseSchema, fromBinary(PublishResponseSchema, published.response)),
    );
  } catch (error) {
    if (error instanceof ConnectError) return sendConnectError(reply, error);
    const appError = AppError.from(error);
    if (appError.status >= 500) request.log.error({ err: error }, 'publish failed');
    return sendConnectError(reply, appError.toConnect());
  }
}

function parseJson(body: Buffer) {
  try {
    return fromJsonString(PublishRequestSchema, body.toString('utf8'));
  } catch (error) {
    throw new ConnectError(
      `malformed PublishRequest JSON: ${(error as Error).message}`,
      Code.InvalidArgument,
    );
  }
}

/** Which requests take the fast path: Connect unary Publish without compression. */
function fastPathFormat(request: FastifyRequest): 'proto' | 'json' | undefined {
  if (request.method !== 'POST' || request.headers['content-encoding'] !== undefined)
    return undefined;
  const type = request.headers['content-type'];
  if (type === 'application/proto') return 'proto';
  if (type === 'application/json' || type === 'application/json; charset=utf-8') return 'json';
  return undefined;
}

/**
 * IngestService over Connect, gRPC and gRPC-Web on the Fastify server. Publish's plain Connect
 * requests take the fast path; every other request (gRPC, gRPC-Web, compressed, PublishStream)
 * is served by connect-es, as @connectrpc/connect-fastify would.
 */
export async function ingestPlugin(
  app: FastifyInstance,
  options: IngestPluginOptions,
): Promise<void> {
  const router = createConnectRouter({
    readMaxBytes: options.maxIngestBytes,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  ingestRoutes(options)(router);
  // Bodies are read by the handlers themselves (raw stream), never by Fastify.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  for (const handler of router.handlers) {
    const fast = handler.requestPath === PUBLISH_PATH;
    app.all(handler.requestPath, async (request, reply) => {
      const format = fast ? fastPathFormat(request) : undefined;
      if (format !== undefined) return fastPublish(request, reply, options, format === 'json');
      reply.hijack();
      const response = await handler(
        universalRequestFromNodeRequest(request.raw, reply.raw, undefined, undefined),
      );
      await universalResponseToNodeResponse(response, reply.raw);
    });
  }
}
