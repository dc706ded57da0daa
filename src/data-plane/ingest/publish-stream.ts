import { ConnectError } from '@connectrpc/connect';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublishResponseSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { AppError } from '../../shared/errors.ts';
import { drainsItself } from '../../shared/http/connections.ts';
import type { Claim } from '../pipeline/admission.ts';
import type { Published } from '../pipeline/pipeline.ts';
import { authenticate, clientError, type PublishDeps, respond } from './publish.ts';
import { type Message, type MessageReader, readMessages } from './read-request.ts';
import type { Wire } from './wire.ts';

// PublishStream in every protocol. An open stream holds a request slot, and its bytes are in
// the budget like a unary request's; its messages are pipelined (a few at a time, in order) and
// their answers kept until the stream ends. A stream that ends any other way than by its client
// (a bad message, a limit, the idle timeout, shutdown) answers the error with, in its details,
// the PublishResponse of the events it made durable (a prefix of those sent): resend the rest.

/** How many messages of one stream may be in the pipeline at once. */
const STREAM_WINDOW = 4;

/** What PublishStream needs besides Publish's needs. */
export interface StreamDeps extends PublishDeps {
  /** Events one stream may carry (MAX_STREAM_EVENTS). */
  maxStreamEvents: number;
  /** Bytes one stream may carry (MAX_STREAM_BYTES). */
  maxStreamBytes: number;
  /** A stream whose next message does not arrive within this is ended (STREAM_IDLE_TIMEOUT_MS). */
  streamIdleTimeoutMs: number;
  streams: OpenStreams;
}

/** The streams being served, so that shutdown can end them. */
export interface OpenStreams {
  /** Tracks a stream: `halt` ends it with the reason; `done` settles once it has answered. */
  add(halt: AbortController, done: Promise<void>): () => void;
  /** Ends every open stream (UNAVAILABLE); resolves once each has answered. */
  endAll(): Promise<void>;
}

const unavailable = (why: string) => new AppError('ERR_UNAVAILABLE', why).toConnect();

/** An empty registry of open streams. */
export function openStreams(): OpenStreams {
  const open = new Map<symbol, { halt: AbortController; done: Promise<void> }>();
  return {
    add(halt, done) {
      const key = Symbol('stream');
      open.set(key, { halt, done });
      return () => open.delete(key);
    },
    async endAll() {
      const reason = unavailable('the service is shutting down; retry');
      const streams = [...open.values()];
      for (const stream of streams) stream.halt.abort(reason);
      await Promise.all(streams.map((stream) => stream.done));
    },
  };
}

/** The next message, or the reason the stream must end now: halted, or idle too long. */
function nextOrEnd(
  reader: MessageReader,
  halt: AbortSignal,
  idleMs: number,
): Promise<Message | undefined | ConnectError> {
  if (halt.aborted) return Promise.resolve(halt.reason as ConnectError);
  return new Promise((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      halt.removeEventListener('abort', onHalt);
      settle();
    };
    const onHalt = () => finish(() => resolve(halt.reason as ConnectError));
    const timer = setTimeout(() => {
      const why = `no message for ${idleMs} ms (STREAM_IDLE_TIMEOUT_MS); the stream was ended`;
      finish(() => resolve(unavailable(why)));
    }, idleMs);
    halt.addEventListener('abort', onHalt, { once: true });
    // Once the stream has ended, a later outcome of this read goes unheard.
    reader.next().then(
      (message) => finish(() => resolve(message)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

/** The answers of several messages as one PublishResponse: ids in order, `accepted` summed. */
function merge(responses: readonly Uint8Array[], accepted: number): Uint8Array {
  // Concatenated messages merge (repeated fields append); the last `accepted` (field 1) wins.
  const total = [0x08];
  for (let n = accepted; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      total.push(n);
      break;
    }
    total.push((n % 128) | 128);
  }
  return Buffer.concat([...responses, Buffer.from(total)]);
}

/**
 * The stream's event allowance (MAX_STREAM_EVENTS). Its messages are routed concurrently but
 * take their events from it in stream order: each waits for the one before it to count (or to
 * fail), so a message refused for the limit is never followed by a later one delivered.
 */
function eventAllowance(max: number) {
  let events = 0;
  let previous = Promise.resolve();
  return () => {
    const before = previous;
    let counted!: () => void;
    previous = new Promise<void>((resolve) => {
      counted = resolve;
    });
    return {
      /** The pipeline's admitEvents for this message. */
      async admit(n: number) {
        await before;
        try {
          if (events + n > max) {
            const why = `a stream may carry at most ${max} events (MAX_STREAM_EVENTS); open a new stream`;
            throw new AppError('ERR_BODY_TOO_LARGE', why);
          }
          events += n;
        } finally {
          counted();
        }
      },
      /** Lets the next message count even when this one failed before it could. */
      done: counted,
    };
  };
}

/** The error, with the PublishResponse of what the stream made durable in its details. */
function withDurable(error: ConnectError, durable: Uint8Array): ConnectError {
  const ended = new ConnectError(error.rawMessage, error.code, error.metadata, [], error.cause);
  // Already encoded: added as the detail connect-es would have decoded from the wire.
  ended.details.push({ type: PublishResponseSchema.typeName, value: durable });
  return ended;
}

/** Serves one PublishStream. */
export async function publishStream(
  request: FastifyRequest,
  reply: FastifyReply,
  wire: Wire,
  deps: StreamDeps,
): Promise<FastifyReply> {
  let claim: Claim;
  try {
    authenticate(request, deps);
    claim = deps.pipeline.admit();
  } catch (error) {
    return respond(request, reply, wire, clientError(request, error), deps);
  }
  const halt = new AbortController();
  let answered!: () => void;
  const done = new Promise<void>((resolve) => {
    answered = resolve;
  });
  const untrack = deps.streams.add(halt, done);
  drainsItself(request.raw);
  try {
    const outcome = await serve(request, wire, claim, halt, deps);
    reply.raw.once('finish', answered).once('close', answered);
    return respond(request, reply, wire, outcome, deps);
  } finally {
    untrack();
    claim.end();
    if (reply.raw.writableFinished || reply.raw.destroyed) answered();
  }
}

/**
 * Reads and publishes the stream's messages until it ends, and gives its answer. The
 * first failed message (in stream order) is the stream's error; failing that, why reading
 * stopped early. Either way every message in flight settles first, so the durable prefix is
 * acknowledged and the claim's bytes are given back.
 */
async function serve(
  request: FastifyRequest,
  wire: Wire,
  claim: Claim,
  halt: AbortController,
  deps: StreamDeps,
): Promise<Uint8Array | ConnectError> {
  const reader = readMessages(request.raw, wire, { claim, maxBytes: deps.maxIngestBytes });
  const nextTurn = eventAllowance(deps.maxStreamEvents);
  const window: Promise<Published>[] = [];
  const responses: Uint8Array[] = [];
  let accepted = 0;
  let carried = 0;
  let failed: ConnectError | undefined;
  let stoppedBy: ConnectError | undefined;
  // The oldest message's answer: kept (its bytes held) while every earlier one succeeded.
  const settle = async () => {
    const published = window.shift()!;
    try {
      const { response, accepted: events } = await published;
      if (failed !== undefined) return;
      claim.take(response.length);
      responses.push(response);
      accepted += events;
    } catch (error) {
      failed ??= clientError(request, error);
    }
  };
  try {
    while (failed === undefined) {
      const message = await nextOrEnd(reader, halt.signal, deps.streamIdleTimeoutMs);
      if (message === undefined) break;
      if (message instanceof ConnectError) throw message;
      carried += message.bytes.length;
      if (carried > deps.maxStreamBytes) {
        claim.give(message.held);
        throw new AppError(
          'ERR_BODY_TOO_LARGE',
          `a stream may carry at most ${deps.maxStreamBytes} bytes (MAX_STREAM_BYTES); open a new stream`,
        );
      }
      const turn = nextTurn();
      const published = deps.pipeline
        .publish(message.bytes, Date.now(), claim, turn.admit)
        .finally(() => {
          turn.done();
          claim.give(message.held);
        });
      // Awaited in order by settle(); a failure also stops reading at once.
      published.catch((error: unknown) => halt.abort(clientError(request, error)));
      window.push(published);
      if (window.length >= STREAM_WINDOW) await settle();
    }
  } catch (error) {
    stoppedBy = clientError(request, error);
  }
  while (window.length > 0) await settle();
  const failure = failed ?? stoppedBy;
  if (failure !== undefined) reader.stop();
  const durable = merge(responses, accepted);
  return failure === undefined ? durable : withDurable(failure, durable);
}
