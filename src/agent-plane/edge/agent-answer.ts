import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { type AnswerHead, headersOf } from './answer-head.ts';

// An agent's answer as the edge's Responders (forward-request.ts, policy-gate.ts) read it: what
// they used of Node's IncomingMessage (status, fields, `complete`, the body as a Readable),
// fed by agent-exchange.ts. A client slower than the agent pauses the agent's stream.

export class AgentAnswer extends Readable {
  readonly statusCode: number;
  readonly statusMessage: string;
  /** [name, value, …] as the agent sent them. */
  readonly rawHeaders: string[];
  /** Whether the whole body came (false for an answer cut short). */
  complete = false;
  readonly #resume: () => void;
  #headers: IncomingHttpHeaders | undefined;

  /** `resume`: reads the agent's stream again after a push the client was not ready for. */
  constructor(head: AnswerHead, resume: () => void) {
    super();
    this.statusCode = head.statusCode;
    this.statusMessage = head.statusMessage;
    this.rawHeaders = head.rawHeaders;
    this.#resume = resume;
  }

  /** The fields as IncomingMessage.headers has them; made when first asked for. */
  get headers(): IncomingHttpHeaders {
    this.#headers ??= headersOf(this.rawHeaders);
    return this.#headers;
  }

  override _read(): void {
    this.#resume();
  }

  /** As IncomingMessage: a cut-short answer's error reaches only those who listen for one. */
  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    done(this.listenerCount('error') > 0 ? error : null);
  }
}
