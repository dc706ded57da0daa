import { AgentAnswer } from './agent-answer.ts';
import type { AgentConnection, ConnectionUser } from './agent-connection.ts';
import { BodyReader } from './answer-body.ts';
import {
  type AnswerHead,
  AnswerParseError,
  framingOf,
  headEnd,
  keepAliveMs,
  keepsAlive,
  MAX_HEAD_BYTES,
  parseHead,
} from './answer-head.ts';
import {
  type BodyFraming,
  bodyEnd,
  type EncodedHead,
  encodeHead,
  finishHead,
  frameChunk,
  type RequestHead,
} from './request-head.ts';
import { type ConnectionPool, FREE_STREAM_IDLE_MS } from './stream-pool.ts';

// One HTTP/1.1 request and its answer over a connection to the agent, written and read by the
// edge itself: the head goes as one buffer with the first of the body (or its end), the answer's
// head is read off the stream (interim 1xx answers passed over) and its body handed on as it
// comes. Why not Node's http client: its request and answer objects, head serializer, parser
// callbacks and Agent bookkeeping per request were a sixth of the edge's thread (issue 27). The
// connection goes back to the pool when both the request and the answer are whole, the agent
// said nothing that forbids it (Connection: close, HTTP/1.0, a body up to the close) and sent
// nothing beyond its answer.

/** What an exchange tells the request it carries. */
export interface ExchangeHandlers {
  /** The answer's head came; its body follows in `answer`. */
  onAnswer(answer: AgentAnswer): void;
  /** The exchange failed before its answer's head; `silent`: no byte of an answer came. */
  onError(error: Error, silent: boolean): void;
}

/** What a request's body may wait in memory before its connection is there. */
const PENDING_BYTES = 64 * 1024;

type Phase = 'head' | 'body' | 'done' | 'failed';

export class AgentExchange implements ConnectionUser {
  /** Whether the connection served an exchange before (backend.connection_reused). */
  reused = false;
  readonly #pool: ConnectionPool;
  readonly #head: EncodedHead;
  readonly #handlers: ExchangeHandlers;
  /** A fresh connection serves this exchange alone (a retry's, as before: Connection: close). */
  readonly #once: boolean;
  #connection: AgentConnection | undefined;
  /** The request's bytes while its connection is being opened. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #drainWaiters: (() => void)[] = [];
  /** Set once the head is encoded. */
  #framing: BodyFraming | undefined;
  #requestEnded = false;
  #phase: Phase = 'head';
  #destroyed = false;
  /** Whether any byte of an answer came. */
  #heard = false;
  /** The head's bytes so far, while they span the stream's chunks. */
  #partial: Buffer | undefined;
  #answer: AgentAnswer | undefined;
  #body: BodyReader | undefined;
  /** How long the connection may wait in the pool after this answer; 0: not at all. */
  #keepMs = 0;

  /**
   * Starts `request` on a pooled connection, or a new one when `fresh` or none is idle; throws
   * at once for a head that cannot be sent (encodeHead).
   */
  constructor(
    pool: ConnectionPool,
    request: RequestHead,
    fresh: boolean,
    handlers: ExchangeHandlers,
  ) {
    this.#head = encodeHead(request);
    this.#pool = pool;
    this.#handlers = handlers;
    this.#once = fresh;
    const idle = fresh ? undefined : pool.take();
    if (idle !== undefined) {
      this.reused = true;
      this.#attach(idle);
    } else {
      pool.open().then(
        (connection) => this.#attach(connection),
        (error: Error) => this.#fail(error, true),
      );
    }
  }

  #attach(connection: AgentConnection): void {
    // Nothing went on a connection that comes after the request's end: it is as good as idle.
    if (this.#destroyed) return void this.#pool.put(connection, FREE_STREAM_IDLE_MS);
    this.#connection = connection;
    connection.user = this;
    if (this.#pending.length === 0) return;
    const flowing = connection.write(Buffer.concat(this.#pending, this.#pendingBytes));
    this.#pending = [];
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const waiter of waiters) {
      if (flowing) waiter();
      else connection.onceDrained(waiter);
    }
  }

  // The request's side.

  /** Sends a chunk of the body; false when the caller should wait for onceDrained. */
  write(chunk: Buffer): boolean {
    if (this.#destroyed || chunk.length === 0) return true;
    if (this.#framing !== undefined) return this.#send(frameChunk(chunk, this.#framing));
    return this.#send([this.#headBytes(true), ...frameChunk(chunk, this.#framing!)]);
  }

  /** Ends the request (its head goes now if no body did). */
  end(): void {
    if (this.#destroyed || this.#requestEnded) return;
    this.#requestEnded = true;
    const parts = this.#framing === undefined ? [this.#headBytes(false)] : [];
    const last = bodyEnd(this.#framing!);
    if (last !== undefined) parts.push(last);
    if (parts.length > 0) this.#send(parts);
    if (this.#phase === 'done') this.#release();
  }

  /** Calls `then` once the connection can take more of the body. */
  onceDrained(then: () => void): void {
    if (this.#connection === undefined) this.#drainWaiters.push(then);
    else this.#connection.onceDrained(then);
  }

  #headBytes(hasBody: boolean): Buffer {
    const { bytes, framing } = finishHead(this.#head, hasBody, !this.#once);
    this.#framing = framing;
    return bytes;
  }

  #send(parts: Buffer[]): boolean {
    const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    const connection = this.#connection;
    if (connection !== undefined) return connection.destroyed || connection.write(bytes);
    this.#pending.push(bytes);
    this.#pendingBytes += bytes.length;
    return this.#pendingBytes < PENDING_BYTES;
  }

  // The answer's side (ConnectionUser).

  onData(chunk: Buffer): void {
    this.#heard = true;
    try {
      this.#read(chunk);
    } catch (error) {
      if (!(error instanceof AnswerParseError)) throw error;
      if (this.#phase === 'head') this.#fail(error, false);
      else this.#connection?.destroy(error);
    }
  }

  #read(chunk: Buffer): void {
    if (this.#phase === 'head') {
      const rest = this.#readHead(chunk);
      // The head alone came, or the answer ended (or was dropped) with it.
      if (rest === undefined || rest.length === 0) return;
      chunk = rest;
    }
    const phase = this.#phase as Phase;
    if (phase === 'body') {
      const at = this.#body!.read(chunk, 0);
      if (this.#body!.done) this.#finish(at < chunk.length);
    } else if (phase === 'done') {
      // The agent spoke beyond its answer: the connection can carry nothing more.
      this.#connection?.destroy();
    }
  }

  /** Reads the final answer's head; the bytes after it, or undefined while it has not come. */
  #readHead(chunk: Buffer): Buffer | undefined {
    let bytes = this.#partial === undefined ? chunk : Buffer.concat([this.#partial, chunk]);
    this.#partial = undefined;
    for (;;) {
      const end = headEnd(bytes);
      if (end === -1 || end > MAX_HEAD_BYTES) {
        if (end > MAX_HEAD_BYTES || bytes.length > MAX_HEAD_BYTES) {
          throw new AnswerParseError('Header overflow');
        }
        this.#partial = bytes;
        return undefined;
      }
      const head = parseHead(bytes, end);
      bytes = bytes.subarray(end);
      // An interim answer (100 Continue, 103 Early Hints) is not passed on, as before.
      if (!interim(head.statusCode)) return this.#onHead(head, bytes);
      if (bytes.length === 0) return undefined;
    }
  }

  #onHead(head: AnswerHead, rest: Buffer): Buffer {
    // A switch of protocols the request did not ask for (upgrades go through upgrade-tunnel.ts).
    if (head.statusCode === 101) throw new AnswerParseError('Unexpected upgrade');
    const framing = framingOf(head, this.#head.method);
    const hint = keepAliveMs(head) ?? FREE_STREAM_IDLE_MS;
    const reusable = keepsAlive(head) && framing.kind !== 'close';
    this.#keepMs = reusable ? Math.min(FREE_STREAM_IDLE_MS, hint) : 0;
    const answer = new AgentAnswer(head, () => this.#connection?.resume());
    this.#answer = answer;
    this.#body = new BodyReader(framing, (bytes) => {
      if (!answer.push(bytes)) this.#connection?.pause();
    });
    this.#phase = 'body';
    this.#handlers.onAnswer(answer);
    if (this.#body.done && this.#phase === 'body') this.#finish(rest.length > 0);
    return rest;
  }

  /** The answer is whole; `spoke`: the agent sent bytes beyond it. */
  #finish(spoke: boolean): void {
    this.#phase = 'done';
    const answer = this.#answer!;
    answer.complete = true;
    answer.push(null);
    if (spoke || this.#keepMs <= 0) return void this.#connection?.destroy();
    if (this.#requestEnded) this.#release();
  }

  /** Gives the connection back to the pool, when the request's body framing lets it. */
  #release(): void {
    const connection = this.#connection;
    this.#connection = undefined;
    if (connection === undefined || connection.destroyed) return;
    connection.user = undefined;
    if (this.#framing?.reusable === false) return void connection.destroy();
    // Paused when the answer's last bytes filled the client's buffer: an idle connection reads,
    // so that anything its far end says closes it.
    connection.resume();
    this.#pool.put(connection, this.#keepMs);
  }

  onEnd(): void {
    // An answer delimited by the connection's close is whole at its end.
    if (this.#phase === 'body' && this.#body!.endsWithStream) this.#finish(false);
  }

  onClose(error: Error | undefined): void {
    if (this.#destroyed) return;
    if (this.#phase === 'head') this.#fail(error ?? hangUp('socket hang up'), !this.#heard);
    else if (this.#phase === 'body') {
      // An answer cut short: its reader sees the error (and `complete` stays false).
      this.#phase = 'failed';
      this.#answer!.destroy(error ?? hangUp('aborted'));
    }
  }

  #fail(error: Error, silent: boolean): void {
    if (this.#destroyed || this.#phase !== 'head') return;
    this.#phase = 'failed';
    this.#connection?.destroy();
    this.#handlers.onError(error, silent);
  }

  /** Ends the exchange: its connection closes, an answer under way is cut short. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    if (this.#phase === 'body') this.#answer!.destroy(hangUp('aborted'));
    this.#phase = 'failed';
    this.#connection?.destroy();
  }
}

/** An interim answer's status (1xx but 101: the edge asked for no switch of protocols). */
function interim(status: number): boolean {
  return status >= 100 && status < 200 && status !== 101;
}

/** The error Node's http client reports for a connection that closed under an exchange. */
function hangUp(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNRESET' });
}
