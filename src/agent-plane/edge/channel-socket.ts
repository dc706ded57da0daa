import { Duplex } from 'node:stream';

// An SSH channel to an agent, as the socket Node's http client expects. ssh2's channel is not
// one: its destroy() only asks the far end to close (`destroyed` stays false and data keeps
// coming until the far end's CLOSE), its readable side ends without closing (OpenSSH sends EOF
// when the agent's local server closes the TCP connection, and CLOSE only after ours), and its
// events run inside ssh2's packet parser, where a throw tears down the agent's whole connection.
// Here: destroy() is final at once, the far end's EOF ends the socket (no half-open HTTP
// connection), an idle channel that hears anything is destroyed (nginx's keepalive rule: an
// idle upstream connection must stay silent), and a throw in what a chunk sets off fails this
// socket only.

/** What the socket reports when a handler of its data throws. */
export type OnFault = (error: unknown) => void;

export class ChannelSocket extends Duplex {
  /** Bytes read from the agent, as net.Socket counts them. */
  bytesRead = 0;
  /** The idle timeout set with setTimeout (0: none), as net.Socket exposes it. */
  timeout = 0;
  /** Set while the socket waits in a pool: anything from the agent then ends it. */
  idle = false;
  readonly #channel: Duplex;
  readonly #onFault: OnFault;
  readonly #onData = this.#guarded((chunk: Buffer) => this.#read(chunk));
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(channel: Duplex, onFault: OnFault) {
    super({ allowHalfOpen: false });
    this.#channel = channel;
    this.#onFault = onFault;
    channel.on('data', this.#onData);
    channel.on(
      'end',
      this.#guarded(() => this.#farEnd(false)),
    );
    channel.on(
      'close',
      this.#guarded(() => this.#farEnd(true)),
    );
    channel.on(
      'error',
      this.#guarded((error: Error) => this.destroy(error)),
    );
  }

  /** A channel event's handler that no throw leaves: ssh2's parser is up the stack. */
  #guarded<A extends unknown[]>(handler: (...args: A) => void): (...args: A) => void {
    return (...args) => {
      try {
        handler(...args);
      } catch (error) {
        this.#onFault(error);
        this.destroy(error as Error);
      }
    };
  }

  #read(chunk: Buffer): void {
    if (this.idle) return void this.destroy();
    this.bytesRead += chunk.length;
    this.#idleTimer?.refresh();
    if (!this.push(chunk)) this.#channel.pause();
  }

  /**
   * The far end's EOF, or its CLOSE (ssh2 emits 'end' first): what it sent is still read to the
   * end (an answer framed by the connection's close needs it), then the socket ends.
   */
  #farEnd(closed: boolean): void {
    if (this.idle || (closed && this.readableEnded)) return void this.destroy();
    this.push(null);
    if (closed) this.once('end', () => this.destroy());
  }

  override _read(): void {
    this.#channel.resume();
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (error?: Error | null) => void,
  ): void {
    this.#idleTimer?.refresh();
    this.#channel.write(chunk, done);
  }

  override _final(done: () => void): void {
    this.#channel.end();
    done();
  }

  override _destroy(error: Error | null, done: (error: Error | null) => void): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    // ssh2's destroy(): EOF and CLOSE to the far end. What still arrives before its CLOSE
    // reaches no one (an answer after the edge's own is dropped here) and is read off.
    this.#channel.off('data', this.#onData);
    this.#channel.destroy();
    this.#channel.resume();
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

  // The rest of net.Socket's surface that http calls: meaningless on a channel.
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
