import { Duplex } from 'node:stream';

// A stream to an agent (an SSH channel, a muxado stream: a LiveSession's openStream()), as the
// socket Node's http client expects. The streams differ in ways a socket must not: ssh2's
// channel destroy() only asks the far end to close (`destroyed` stays false and data keeps
// coming until the far end's CLOSE), its readable side ends without closing (OpenSSH sends EOF
// when the agent's local server closes the TCP connection, and CLOSE only after ours), and its
// events run inside ssh2's packet parser, where a throw tears down the agent's whole connection;
// a muxado stream ends its directions apart (FIN) too. Here, whatever the stream: destroy() is
// final at once, the far end's EOF ends the socket (no half-open HTTP connection), an idle stream
// that hears anything is destroyed (nginx's keepalive rule: an idle upstream connection must stay
// silent), and a throw in what a chunk sets off fails this socket only.

/** What the socket reports when a handler of its data throws. */
export type OnFault = (error: unknown) => void;

/**
 * Makes a stream event's handlers throw-proof: a protocol's parser may be up the stack (ssh2's),
 * so a throw is reported to `onFault` and `fail`s this one connection, not the agent's session.
 */
export function faultGuard(onFault: OnFault, fail: (error: Error) => void) {
  return <A extends unknown[]>(handler: (...args: A) => void) =>
    (...args: A): void => {
      try {
        handler(...args);
      } catch (error) {
        onFault(error);
        fail(error as Error);
      }
    };
}

export class StreamSocket extends Duplex {
  /** Bytes read from the agent, as net.Socket counts them. */
  bytesRead = 0;
  /** The idle timeout set with setTimeout (0: none), as net.Socket exposes it. */
  timeout = 0;
  /** Set while the socket waits in a pool: anything from the agent then ends it. */
  idle = false;
  readonly #stream: Duplex;
  readonly #onData: (chunk: Buffer) => void;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(stream: Duplex, onFault: OnFault) {
    super({ allowHalfOpen: false });
    this.#stream = stream;
    const guarded = faultGuard(onFault, (error) => this.destroy(error));
    this.#onData = guarded((chunk: Buffer) => this.#read(chunk));
    stream.on('data', this.#onData);
    stream.on(
      'end',
      guarded(() => this.#farEnd(false)),
    );
    stream.on(
      'close',
      guarded(() => this.#farEnd(true)),
    );
    stream.on(
      'error',
      guarded((error: Error) => this.destroy(error)),
    );
  }

  #read(chunk: Buffer): void {
    if (this.idle) return void this.destroy();
    this.bytesRead += chunk.length;
    this.#idleTimer?.refresh();
    if (!this.push(chunk)) this.#stream.pause();
  }

  /**
   * The far end's EOF, or its close ('end' comes first): what it sent is still read to the
   * end (an answer framed by the connection's close needs it), then the socket ends.
   */
  #farEnd(closed: boolean): void {
    if (this.idle || (closed && this.readableEnded)) return void this.destroy();
    this.push(null);
    if (closed) this.once('end', () => this.destroy());
  }

  override _read(): void {
    this.#stream.resume();
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (error?: Error | null) => void,
  ): void {
    this.#idleTimer?.refresh();
    this.#stream.write(chunk, done);
  }

  override _final(done: () => void): void {
    this.#stream.end();
    done();
  }

  override _destroy(error: Error | null, done: (error: Error | null) => void): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    // The stream's destroy() (ssh2: EOF and CLOSE to the far end; muxado: RST unless both sides
    // ended). What still arrives before the far end's close reaches no one (an answer after the
    // edge's own is dropped here) and is read off.
    this.#stream.off('data', this.#onData);
    this.#stream.destroy();
    this.#stream.resume();
    done(error);
  }

  /** As net.Socket: 'timeout' after `ms` without a byte either way (0: never). */
  setTimeout(ms: number, onTimeout?: () => void): this {
    clearTimeout(this.#idleTimer);
    this.timeout = ms;
    this.#idleTimer = ms > 0 ? setTimeout(() => this.emit('timeout'), ms).unref() : undefined;
    if (onTimeout !== undefined) {
      if (ms > 0) this.once('timeout', onTimeout);
      else this.removeListener('timeout', onTimeout);
    }
    return this;
  }

  // The rest of net.Socket's surface that http calls: meaningless on a stream.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}
