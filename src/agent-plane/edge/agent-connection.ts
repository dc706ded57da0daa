import type { Duplex } from 'node:stream';
import { faultGuard, type OnFault } from './stream-socket.ts';

// A stream to an agent (an SSH channel, a muxado stream) as the connection of one HTTP exchange
// at a time (agent-exchange.ts), without a socket's machinery between them: its events go
// straight to the exchange that holds it. The streams' quirks are met as stream-socket.ts meets
// them for upgrades: destroy() is final at once (ssh2's only asks the far end), the far end's EOF
// ends the connection (no half-open HTTP connection), an idle connection that hears anything is
// destroyed (nginx's keepalive rule), and a throw in what a chunk sets off fails this connection
// only (the stream's events may run inside ssh2's packet parser).

/** What a connection tells the exchange that holds it. */
export interface ConnectionUser {
  onData(chunk: Buffer): void;
  /** The far end's EOF or close: nothing more comes. */
  onEnd(): void;
  /** The connection is gone (destroyed, failed, or the far end closed). */
  onClose(error: Error | undefined): void;
}

export class AgentConnection {
  /** Set while the connection waits in a pool: anything from the agent then ends it. */
  idle = false;
  destroyed = false;
  /** The exchange the connection serves; undefined while pooled. */
  user: ConnectionUser | undefined;
  readonly #stream: Duplex;
  #ended = false;
  #onClosed: (() => void) | undefined;

  constructor(stream: Duplex, onFault: OnFault) {
    this.#stream = stream;
    const guarded = faultGuard(onFault, (error) => this.destroy(error));
    stream.on(
      'data',
      guarded((chunk: Buffer) => this.#data(chunk)),
    );
    stream.on(
      'end',
      guarded(() => this.#farEnd()),
    );
    stream.on(
      'close',
      guarded(() => this.#farEnd()),
    );
    stream.on(
      'error',
      guarded((error: Error) => this.destroy(error)),
    );
  }

  #data(chunk: Buffer): void {
    if (this.destroyed) return;
    if (this.idle || this.user === undefined) return void this.destroy();
    this.user.onData(chunk);
  }

  #farEnd(): void {
    if (this.#ended || this.destroyed) return;
    this.#ended = true;
    if (this.idle || this.user === undefined) return void this.destroy();
    this.user.onEnd();
    this.destroy();
  }

  /** Writes `chunk` to the agent; false when the stream asks to wait for 'drain'. */
  write(chunk: Buffer): boolean {
    return this.#stream.write(chunk);
  }

  /** Calls `then` once the stream drained. */
  onceDrained(then: () => void): void {
    this.#stream.once('drain', then);
  }

  /** Stops reading from the agent (the client reads slower than the agent sends). */
  pause(): void {
    this.#stream.pause();
  }

  resume(): void {
    this.#stream.resume();
  }

  /** Calls `then` once when the connection is destroyed (a pool drops it). */
  onceClosed(then: (() => void) | undefined): void {
    this.#onClosed = then;
  }

  /**
   * Ends the connection at once: the stream's destroy() (ssh2: EOF and CLOSE to the far end;
   * muxado: RST unless both sides ended). What still arrives before the far end's close reaches
   * no one and is read off.
   */
  destroy(error?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.#stream.destroy();
    this.#stream.resume();
    const user = this.user;
    this.user = undefined;
    this.#onClosed?.();
    user?.onClose(error);
  }
}
