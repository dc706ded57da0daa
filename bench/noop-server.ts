import { create } from '@bufbuild/protobuf';
import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import Fastify from 'fastify';
import {
  IngestService,
  PublishResponseSchema,
} from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// The pipeline benchmark's baseline: the same server stack (Fastify + connect-fastify + the
// same generated IngestService) with a Publish that decodes the request and does nothing else.

const app = Fastify({ logger: false });
await app.register(fastifyConnectPlugin, {
  readMaxBytes: 64 * 1024 * 1024,
  routes: (router) =>
    router.service(IngestService, {
      publish: (request) => create(PublishResponseSchema, { accepted: request.events.length }),
      publishStream: async () => create(PublishResponseSchema, {}),
    }),
});
const url = await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`noop listening on ${url}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
