import type {
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  ServerResponse,
} from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from '../../shared/logger.ts';
import { TOO_MANY_STREAMS } from '../sessions/live-session.ts';
import type { AgentAnswer } from './agent-answer.ts';
import { AgentExchange } from './agent-exchange.ts';
import { errorPage, invalidStatus } from './edge-answers.ts';
import { endToEndFields } from './proxy-headers.ts';
import type { AgentStreams } from './stream-pool.ts';

// One request to an agent and its answer back. The request goes on a pooled stream, in HTTP/1.1
// the edge writes and reads itself (agent-exchange.ts, docs/decisions.md#edge-exchange); one whose
// stream closes before any byte of an answer, when that stream was a reused one (the agent's
// server closed it as it went idle: the keep-alive race), is sent once more on a fresh stream,
// if sending it again is safe: an idempotent method whose body is still at hand, or any method
// before anything of it was sent. Otherwise, and for a fresh stream that fails, 502, as nginx
// does with one upstream (docs/decisions.md#edge-retry). The agent has EDGE_RESPONSE_TIMEOUT_MS
// in all to start its answer (504); an answer after the edge's own is dropped, and one with a
// status HTTP does not have is a 502.

/** Methods whose repetition has the effect of one request (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** The most of an idempotent request's body kept for a retry; past it, no retry. */
const REPLAY_BYTES = 64 * 1024;

/** What the agent answered, for the request's event. */
export interface Answered {
  /** The agent's answer head's fields; undefined when the edge answered itself. */
  headers: IncomingHttpHeaders | undefined;
  bodyBytes: number;
  /** Whether the (last) attempt went on a stream reused from the pool. */
  reused: boolean;
}

export interface ForwardOptions {
  /** The routed host, for the edge's own answers and logs. */
  host: string;
  headers: OutgoingHttpHeaders;
  timeoutMs: number;
  logger: Logger;
  /** The path and query sent (a policy's url-rewrite); the request's own by default. */
  target?: string;
  /** The body sent, when something read it first (a policy's verify-webhook); else the request. */
  body?: Readable;
  /**
   * Writes the agent's answer to the client (a policy's on_http_response); by default its
   * status and end-to-end fields, then its body as it comes.
   */
  respond?: Responder;
}

/** Writes an agent's answer (its head's end-to-end fields given) to the client's response. */
export type Responder = (answer: AgentAnswer, fields: string[], response: ServerResponse) => void;

/** The answer as it came: status, end-to-end fields, body streamed. */
const passThrough: Responder = (answer, fields, response) => {
  response.writeHead(answer.statusCode!, fields);
  relayBody(answer, response);
};

/**
 * Streams an answer's body to the client; an answer cut short (its stream failed or closed)
 * cuts the response short too. Not stream.pipeline: it aborts an AbortController whenever it
 * finishes, and that DOMException's stack trace was ~2 % of the edge's thread per request.
 */
export function relayBody(answer: AgentAnswer, response: ServerResponse): void {
  answer.pipe(response);
  const cutShort = () => {
    if (!answer.complete) response.destroy();
  };
  answer.once('error', cutShort);
  answer.once('close', cutShort);
}

/** Sends `request` to the agent and streams its answer to `response`; what was answered. */
export function forwardRequest(
  streams: AgentStreams,
  request: IncomingMessage,
  response: ServerResponse,
  { host, headers, timeoutMs, logger, target, body: source, respond = passThrough }: ForwardOptions,
): Answered {
  const answered: Answered = { headers: undefined, bodyBytes: 0, reused: false };
  const method = request.method ?? 'GET';
  const body = new BodyRelay(source ?? request, IDEMPOTENT.has(method));
  let clientGone = false;
  let retried = false;
  const head = { method, target: target ?? request.url ?? '/', headers };
  let current: AgentExchange;
  try {
    current = attempt(false);
  } catch (error) {
    // A policy's rewrite HTTP cannot carry (a CR, LF or control character): nothing was sent.
    logger.warn({ err: error, host }, 'edge: the request cannot be written to the agent');
    request.resume();
    errorPage(response, 502, `The request for ${host} cannot be sent to its agent.`);
    return answered;
  }
  // One timer for every attempt: the request's whole wait for the start of its answer.
  const timer = setTimeout(() => {
    current.destroy();
    logger.info({ host, timeoutMs }, 'edge: the agent did not answer in time (504)');
    errorPage(response, 504, `The agent for ${host} did not answer in time.`);
  }, timeoutMs);
  // A client that leaves takes its request to the agent with it: its stream is freed at once.
  response.once('close', () => {
    clearTimeout(timer);
    clientGone = !response.writableFinished;
    if (clientGone) current.destroy();
  });
  if (!request.complete) freeOnLeaving(request, () => current.destroy());
  return answered;

  function attempt(fresh: boolean): AgentExchange {
    const exchange: AgentExchange = new AgentExchange(streams.pool, head, fresh, {
      onAnswer: (answer) => onAnswer(exchange, answer),
      onError: (error, silent) => onError(exchange, error, silent),
    });
    answered.reused = exchange.reused;
    body.sendTo(exchange);
    return exchange;
  }

  function onError(exchange: AgentExchange, error: Error, silent: boolean) {
    if (exchange !== current || response.headersSent || clientGone) return;
    if (!retried && exchange.reused && silent && body.replayable) {
      retried = true;
      logger.debug({ err: error, host }, 'edge: a reused stream closed; retrying on a new one');
      current = attempt(true);
      return;
    }
    clearTimeout(timer);
    const busy = (error as NodeJS.ErrnoException).code === TOO_MANY_STREAMS;
    logger.info({ err: error, host }, 'edge: the request to the agent failed');
    errorPage(
      response,
      busy ? 503 : 502,
      `The agent for ${host} is not reachable: ${error.message}.`,
    );
  }

  function onAnswer(exchange: AgentExchange, answer: AgentAnswer) {
    if (response.headersSent || clientGone) {
      logger.info({ host }, 'edge: the agent answered after the edge did; its answer is dropped');
      return void exchange.destroy();
    }
    clearTimeout(timer);
    const status = answer.statusCode;
    if (invalidStatus(status)) {
      logger.warn({ host, status }, 'edge: the agent answered with an invalid status code');
      exchange.destroy();
      return errorPage(
        response,
        502,
        `The agent for ${host} answered an invalid status ${status}.`,
      );
    }
    answered.headers = answer.headers;
    answer.on('data', (chunk: Buffer) => {
      answered.bodyBytes += chunk.length;
    });
    respond(answer, endToEndFields(answer.rawHeaders), response);
  }
}

/**
 * Calls `free` if the client leaves before its request's body ended, even after its response
 * finished: that body never ends, and its stream would be held for good (never back in the pool
 * with half a body sent). Its socket tells: Node no longer closes a request whose response
 * finished.
 */
function freeOnLeaving(request: IncomingMessage, free: () => void): void {
  const { socket } = request;
  socket.once('close', free);
  request.once('end', () => socket.off('close', free));
}

/** The client's request body, relayed to one attempt after another. */
class BodyRelay {
  readonly #request: Readable;
  #target: AgentExchange | undefined;
  /** What was relayed, kept for a retry; undefined when it is not (or no longer) kept. */
  #kept: Buffer[] | undefined;
  #keptBytes = 0;
  /** Whether anything (a body byte, or the end of the body) went to an attempt. */
  #started = false;
  #ended = false;

  constructor(request: Readable, keep: boolean) {
    this.#request = request;
    this.#kept = keep ? [] : undefined;
  }

  /** Whether the request can be sent again whole: nothing sent yet, or all of it kept. */
  get replayable(): boolean {
    return this.#kept !== undefined || !this.#started;
  }

  /** Relays the body to `target`, after what the previous targets got. */
  sendTo(target: AgentExchange): void {
    const first = this.#target === undefined;
    this.#target = target;
    for (const chunk of this.#kept ?? []) target.write(chunk);
    // A bodiless request ends even while paused: its end may have passed while a policy waited.
    if (first && this.#request.readableEnded) this.#ended = this.#started = true;
    if (this.#ended) return void target.end();
    if (!first) return void this.#request.resume();
    this.#request.on('data', (chunk: Buffer) => this.#relay(chunk));
    this.#request.on('end', () => {
      this.#ended = true;
      this.#started = true;
      this.#target!.end();
    });
  }

  #relay(chunk: Buffer): void {
    this.#started = true;
    if (this.#kept !== undefined) {
      this.#keptBytes += chunk.length;
      if (this.#keptBytes > REPLAY_BYTES) this.#kept = undefined;
      else this.#kept.push(chunk);
    }
    const target = this.#target!;
    if (!target.write(chunk)) {
      this.#request.pause();
      target.onceDrained(() => target === this.#target && this.#request.resume());
    }
  }
}
