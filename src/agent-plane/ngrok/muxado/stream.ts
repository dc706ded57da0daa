import { Duplex } from 'node:stream';
import {
  ERROR_CODES,
  type ErrorCode,
  encodeFrame,
  encodeU32Frame,
  errorName,
  FLAGS,
  FRAME_TYPES,
} from './frame.ts';

// One muxado stream as a Node Duplex. Flow control is per stream and one-way each: the peer may
// send us `window` bytes, and each byte our reader takes back is granted again with WNDINC (in
// batches, never while our reader is behind: that is the back-pressure); we send the peer at most
// what it granted, waiting for its WNDINC when the window is spent. DATA past our window is the
// peer's flow-control error (the stream is reset). FIN ends a direction; RST ends the stream at
// once; a stream ended before both directions finished resets the peer's side.

/** What a stream needs of its session. */
export interface StreamHost {
  /** Writes a frame; `done` runs once the session took it (with an error if it is gone). */
  send(frame: Buffer, done?: (error?: Error | null) => void): void;
  /** The stream is over: the session forgets its id. */
  forget(id: number): void;
}

/** The error a stream ends with when the peer reset it, or its session ended. */
export class StreamError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'StreamError';
    this.code = code;
  }
}

/** The largest DATA body written at once: the peer's window bounds it anyway. */
const MAX_DATA_BYTES = 64 * 1024;

export class MuxStream extends Duplex {
  readonly id: number;
  /** Bytes read from the peer, as net.Socket counts them. */
  bytesRead = 0;
  readonly #host: StreamHost;
  /** What the peer may still send before we grant more. */
  #receiveWindow: number;
  /** Bytes read since the last WNDINC; granted at `#grantAt` or when our reader asks. */
  #credit = 0;
  readonly #grantAt: number;
  /** What we may still send before the peer grants more. */
  #sendWindow: number;
  /** A write waiting for the peer's WNDINC: how it resumes, and its callback. */
  #waiting: { resume: () => void; done: (e?: Error | null) => void } | undefined;
  /** True until our first frame went: it carries SYN (streams this side opened). */
  #syn: boolean;
  #finSent = false;
  #finReceived = false;
  /** Set when the peer reset the stream or the session ended: no RST goes back. */
  #silent = false;

  constructor(host: StreamHost, id: number, options: { window: number; opening: boolean }) {
    super({ allowHalfOpen: true });
    this.#host = host;
    this.id = id;
    this.#receiveWindow = options.window;
    this.#sendWindow = options.window;
    this.#grantAt = Math.max(1, options.window >> 3);
    this.#syn = options.opening;
  }

  /** A DATA frame's body from the peer; an error code when it breaks the stream's rules. */
  receive(body: Buffer, fin: boolean): ErrorCode | undefined {
    if (this.#finReceived) return ERROR_CODES.streamClosed;
    if (body.length > this.#receiveWindow) return ERROR_CODES.flowControl;
    this.#receiveWindow -= body.length;
    if (body.length > 0 && !this.destroyed) {
      this.bytesRead += body.length;
      this.#credit += body.length;
      if (this.push(body) && this.#credit >= this.#grantAt) this.#grant();
    }
    if (fin) {
      this.#finReceived = true;
      this.push(null);
    }
    return undefined;
  }

  /** The peer's WNDINC. */
  grow(increment: number): void {
    this.#sendWindow += increment;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.resume();
  }

  /** The peer's RST, or the session's end: the stream ends at once with `code`. */
  abort(code: number, why = `the peer reset the stream: ${errorName(code)}`): void {
    this.#silent = true;
    this.destroy(code === ERROR_CODES.none ? undefined : new StreamError(code, why));
  }

  #grant(): void {
    if (this.#credit === 0 || this.#finReceived || this.destroyed) return;
    const credit = this.#credit;
    // The window first: the peer may answer the frame before send() returns.
    this.#receiveWindow += credit;
    this.#credit = 0;
    this.#host.send(encodeU32Frame(FRAME_TYPES.wndinc, this.id, credit));
  }

  #flags(fin: boolean): number {
    const syn = this.#syn ? FLAGS.syn : 0;
    this.#syn = false;
    return syn | (fin ? FLAGS.fin : 0);
  }

  override _read(): void {
    this.#grant();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (e?: Error | null) => void) {
    this.#sendFrom(chunk, 0, done);
  }

  /** Sends `chunk` from `offset` in frames the peer's window allows, then calls `done`. */
  #sendFrom(chunk: Buffer, offset: number, done: (e?: Error | null) => void): void {
    let sent = offset;
    while (sent < chunk.length) {
      if (this.#sendWindow === 0) {
        this.#waiting = { resume: () => this.#sendFrom(chunk, sent, done), done };
        return;
      }
      const size = Math.min(this.#sendWindow, chunk.length - sent, MAX_DATA_BYTES);
      const body = chunk.subarray(sent, sent + size);
      this.#sendWindow -= size;
      sent += size;
      const frame = encodeFrame(FRAME_TYPES.data, this.#flags(false), this.id, body);
      this.#host.send(frame, sent === chunk.length ? done : undefined);
    }
    if (chunk.length === 0) done();
  }

  override _final(done: (e?: Error | null) => void): void {
    this.#finSent = true;
    this.#host.send(encodeFrame(FRAME_TYPES.data, this.#flags(true), this.id), done);
  }

  override _destroy(error: Error | null, done: (e: Error | null) => void): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    // A stream the peer never heard of (no frame sent yet) needs no RST either.
    const known = !this.#syn;
    if (known && !this.#silent && !(this.#finSent && this.#finReceived)) {
      this.#host.send(encodeU32Frame(FRAME_TYPES.rst, this.id, ERROR_CODES.streamCancelled));
    }
    this.#host.forget(this.id);
    done(error);
    waiting?.done(error ?? new StreamError(ERROR_CODES.streamClosed, 'the stream was closed'));
  }
}
