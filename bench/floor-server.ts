import { create, toBinary } from '@bufbuild/protobuf';
import Fastify from 'fastify';
import {
  IngestService,
  PublishResponseSchema,
} from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// The pipeline benchmark's floor: the same HTTP/1.1 server (Fastify, the body left to the
// handler as the service's ingest does) reading each Publish body whole into one buffer and
// answering a Connect PublishResponse encoded once, without decoding the request. What no
// service on this stack can go below; bench/noop-server.ts adds protobuf-es's decode on top.

const PATH = `/${IngestService.typeName}/${IngestService.method.publish.name}`;
const ANSWER = Buffer.from(toBinary(PublishResponseSchema, create(PublishResponseSchema, {})));

/** Reads a body into one buffer (sized by Content-Length when announced, as the service does). */
function readBody(request: NodeJS.ReadableStream & { headers: Record<string, unknown> }) {
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  const body = Number.isInteger(declared) ? Buffer.allocUnsafe(declared) : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise<Buffer>((resolve, reject) => {
    request.on('data', (chunk: Buffer) => {
      if (body !== undefined) chunk.copy(body, size);
      else chunks.push(chunk);
      size += chunk.length;
    });
    request.on('end', () => resolve(body?.subarray(0, size) ?? Buffer.concat(chunks, size)));
    request.on('error', reject);
  });
}

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', (_request, _payload, done) => done(null));
app.post(PATH, async (request, reply) => {
  await readBody(request.raw);
  return reply.type('application/proto').send(ANSWER);
});
const url = await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`floor listening on ${url}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
