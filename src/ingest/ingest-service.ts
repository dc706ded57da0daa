import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { bearerToken } from '../auth/tokens.ts';
import { AppError } from '../errors.ts';
import {
  IngestService,
  type PublishRequest,
  PublishRequestSchema,
  PublishResponseSchema,
} from '../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';

/** How many requests of one PublishStream may be in the pipeline at once. */
const STREAM_WINDOW = 4;

/** What the ingest service needs: the pipeline and the check of edge proxies' tokens. */
export interface IngestDeps {
  pipeline: Pipeline;
  isIngestToken: (token: string) => boolean;
}

function authenticate(context: HandlerContext, isIngestToken: IngestDeps['isIngestToken']): void {
  const token = bearerToken(context.requestHeader.get('authorization') ?? undefined);
  if (token === undefined || !isIngestToken(token)) {
    throw new ConnectError(
      'a valid ingest token is required: "Authorization: Bearer <token>"',
      Code.Unauthenticated,
    );
  }
}

/** Publishes one request; AppErrors become their Connect code. */
async function publishOne(pipeline: Pipeline, request: PublishRequest): Promise<string[]> {
  try {
    const result = await pipeline.publish(toBinary(PublishRequestSchema, request), Date.now());
    return fromBinary(PublishResponseSchema, result.response).eventIds;
  } catch (error) {
    throw AppError.from(error).toConnect();
  }
}

/**
 * The stream's messages, with connect-es's INTERNAL for a frame or message it cannot parse
 * turned into INVALID_ARGUMENT: a client's bad bytes are not the service's fault.
 */
async function* clientMistakesAreInvalid<T>(messages: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    const connectError = ConnectError.from(error);
    if (connectError.code !== Code.Internal) throw connectError;
    throw new ConnectError(
      connectError.rawMessage,
      Code.InvalidArgument,
      undefined,
      undefined,
      error,
    );
  }
}

/**
 * IngestService: `Publish` answers when every event of the batch is durable; `PublishStream`
 * (for long-lived edge connections) pipelines its messages and answers once all are durable.
 */
export function ingestRoutes({ pipeline, isIngestToken }: IngestDeps) {
  return (router: ConnectRouter) => {
    router.service(IngestService, {
      async publish(request, context) {
        authenticate(context, isIngestToken);
        const eventIds = await publishOne(pipeline, request);
        return create(PublishResponseSchema, { accepted: eventIds.length, eventIds });
      },
      async publishStream(requests, context) {
        authenticate(context, isIngestToken);
        const eventIds: string[] = [];
        const window: Promise<string[]>[] = [];
        const settle = async () => eventIds.push(...(await window.shift()!));
        for await (const request of clientMistakesAreInvalid(requests)) {
          const published = publishOne(pipeline, request);
          published.catch(() => {}); // awaited in order by settle(); this only marks it handled
          window.push(published);
          if (window.length >= STREAM_WINDOW) await settle();
        }
        while (window.length > 0) await settle();
        return create(PublishResponseSchema, { accepted: eventIds.length, eventIds });
      },
    });
  };
}
