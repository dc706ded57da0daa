import { createConnectRouter } from '@connectrpc/connect';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from '@connectrpc/connect-node';
import type { FastifyInstance } from 'fastify';
import { IngestService } from '../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { type FastPublishDeps, fastFormat, fastPublish } from './fast-publish.ts';
import { type IngestDeps, ingestRoutes } from './ingest-service.ts';

const PUBLISH_PATH = `/${IngestService.typeName}/${IngestService.method.publish.name}`;

/** Options of the ingest endpoint. */
export type IngestPluginOptions = IngestDeps & FastPublishDeps;

/**
 * IngestService over Connect, gRPC and gRPC-Web on the Fastify server. Publish's Connect and
 * gRPC-Web unary requests take the fast path (fast-publish.ts); gRPC, compressed gRPC-Web and
 * PublishStream are served by connect-es, as @connectrpc/connect-fastify would.
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
      const format = fast ? fastFormat(request) : undefined;
      if (format !== undefined) return fastPublish(request, reply, format, options);
      reply.hijack();
      const response = await handler(
        universalRequestFromNodeRequest(request.raw, reply.raw, undefined, undefined),
      );
      await universalResponseToNodeResponse(response, reply.raw);
    });
  }
}
