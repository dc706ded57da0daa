import { createConnectRouter } from '@connectrpc/connect';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from '@connectrpc/connect-node';
import type { FastifyInstance } from 'fastify';
import { IngestService } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { publish } from './publish.ts';
import { openStreams, publishStream, type StreamDeps } from './publish-stream.ts';
import { wireOf } from './wire.ts';

/** Options of the ingest endpoint. */
export type IngestPluginOptions = Omit<StreamDeps, 'streams'>;

/**
 * IngestService over Connect, gRPC and gRPC-Web on the Fastify server. Publish and PublishStream
 * are served by publish.ts and publish-stream.ts in every protocol and encoding connect-es
 * accepts; connect-es itself answers the rest (other content types, encodings, methods) with
 * each protocol's own error. On close, open streams are ended before the server stops.
 */
export async function ingestPlugin(
  app: FastifyInstance,
  options: IngestPluginOptions,
): Promise<void> {
  const router = createConnectRouter({
    readMaxBytes: options.maxIngestBytes,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  router.service(IngestService, {});
  const streams = openStreams();
  app.addHook('preClose', () => streams.endAll());
  // Bodies are read by the handlers themselves (raw stream), never by Fastify.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  for (const handler of router.handlers) {
    const streaming = handler.method.methodKind === 'client_streaming';
    app.all(handler.requestPath, async (request, reply) => {
      const wire = wireOf(request, streaming);
      if (wire !== undefined) {
        return streaming
          ? publishStream(request, reply, wire, { ...options, streams })
          : publish(request, reply, wire, options);
      }
      reply.hijack();
      const response = await handler(
        universalRequestFromNodeRequest(request.raw, reply.raw, undefined, undefined),
      );
      await universalResponseToNodeResponse(response, reply.raw);
    });
  }
}
