import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import {
  ERROR_CODES,
  type ErrorCode,
  encodeGoAway,
  encodeU32Frame,
  errorName,
  FLAGS,
  FRAME_TYPES,
  type Frame,
} from './frame.ts';
import { FrameError, FrameReader } from './frame-reader.ts';
import { MuxStream, StreamError, type StreamHost } from './stream.ts';

// A muxado session over one connection: the client opens odd streams, the server even ones (the
// service is the server; the client side exists for tests and tools). The limits a server needs: live streams per session (past them a new stream is refused
// with RST), a bounded queue of opened streams nobody has claimed yet (RST accept-queue-full),
// a window per stream (what the peer may send unread), and a largest frame. A malformed frame
// ends the session with GOAWAY (protocol or frame-size error); so does close() at shutdown.

/** The limits of one session. */
export interface SessionLimits {
  /** Live streams, both sides' (muxado's default: 512). */
  maxStreams: number;
  /** Bytes per stream the peer may send before we grant more (muxado's default: 256 KiB). */
  window: number;
  /** Streams the peer opened that are not yet claimed (muxado's default: 64). */
  acceptQueue: number;
}

/** muxado's own defaults: the client assumes our window is its own, 256 KiB. */
export const DEFAULT_LIMITS: SessionLimits = {
  maxStreams: 512,
  window: 256 * 1024,
  acceptQueue: 64,
};

/** Why open() could not open a stream. */
export class SessionError extends Error {
  /** muxado's error code (the peer's may be one this side does not know). */
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'SessionError';
    this.code = code;
  }
}

export interface MuxSessionEvents {
  /** The peer opened a stream: claim() it once its purpose is known. */
  stream: [MuxStream];
  /** The session ended; `error` says why when it was not a clean close. */
  close: [Error | undefined];
}

export class MuxSession extends EventEmitter<MuxSessionEvents> {
  readonly #socket: Duplex;
  readonly #limits: SessionLimits;
  readonly #reader: FrameReader;
  readonly #streams = new Map<number, MuxStream>();
  /** Streams the peer opened and nobody claimed yet. */
  readonly #unclaimed = new Set<MuxStream>();
  #nextId: number;
  #lastRemoteId = 0;
  /** Set once GOAWAY went either way: no new stream either way. */
  #goneAway = false;
  #closed = false;
  readonly #host: StreamHost = {
    send: (frame, done) => this.#send(frame, done),
    forget: (id) => {
      const stream = this.#streams.get(id);
      if (stream !== undefined) this.#unclaimed.delete(stream);
      this.#streams.delete(id);
    },
  };

  readonly #peerParity: number;

  constructor(
    socket: Duplex,
    limits: SessionLimits = DEFAULT_LIMITS,
    role: 'server' | 'client' = 'server',
  ) {
    super();
    this.#nextId = role === 'server' ? 2 : 1;
    this.#peerParity = role === 'server' ? 1 : 0;
    this.#socket = socket;
    this.#limits = limits;
    // DATA never exceeds the window (flow control), GOAWAY's message is short.
    this.#reader = new FrameReader(limits.window);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.once('close', () => this.#end(undefined));
    socket.on('error', (error: Error) => this.#end(error));
  }

  /** Live streams. */
  get streamCount(): number {
    return this.#streams.size;
  }

  /** Whether the session still carries streams. */
  get open(): boolean {
    return !this.#closed && !this.#goneAway;
  }

  /** Opens a stream to the peer; its first write carries SYN. */
  openStream(): MuxStream {
    if (!this.open) throw new SessionError(ERROR_CODES.sessionClosed, 'the session is closed');
    if (this.#streams.size >= this.#limits.maxStreams) {
      throw new SessionError(
        ERROR_CODES.streamsExhausted,
        `the session has ${this.#limits.maxStreams} streams open`,
      );
    }
    const id = this.#nextId;
    this.#nextId += 2;
    const stream = new MuxStream(this.#host, id, { window: this.#limits.window, opening: true });
    this.#streams.set(id, stream);
    return stream;
  }

  /** Takes a stream the peer opened off the accept queue. */
  claim(stream: MuxStream): void {
    this.#unclaimed.delete(stream);
  }

  /** GOAWAY with `code` and `message`, then the connection ends (streams with it). */
  close(code: ErrorCode = ERROR_CODES.none, message = ''): void {
    if (this.#closed) return;
    if (!this.#goneAway) {
      this.#goneAway = true;
      this.#socket.write(encodeGoAway(this.#lastRemoteId, code, message));
    }
    this.#socket.end();
    this.#end(code === ERROR_CODES.none ? undefined : new SessionError(code, message));
  }

  /** Frames written so far: whether anything went out since a given moment. */
  #writes = 0;
  /** The stream of the last WNDINC that awaits an answer, when one is scheduled. */
  #acknowledging: number | undefined;

  /**
   * Answers the peer's WNDINC with a segment of ours at the end of this turn of the loop, unless
   * something else was written meanwhile. ngrok's Rust SDK leaves Nagle on and writes a WNDINC
   * as it reads each request, then the answer: Nagle holds that answer until the WNDINC is
   * acknowledged, and this side's kernel delays that ACK (40 ms) when it has nothing to send. An
   * empty WNDINC (increment 0: a no-op for every muxado) carries the ACK at once.
   */
  #acknowledgeSoon(streamId: number): void {
    const scheduled = this.#acknowledging !== undefined;
    this.#acknowledging = streamId;
    if (scheduled) return;
    const writes = this.#writes;
    setImmediate(() => {
      const id = this.#acknowledging ?? 0;
      this.#acknowledging = undefined;
      if (this.#writes === writes && this.#streams.has(id)) {
        this.#send(encodeU32Frame(FRAME_TYPES.wndinc, id, 0));
      }
    });
  }

  #send(frame: Buffer, done?: (error?: Error | null) => void): void {
    this.#writes += 1;
    if (this.#closed || this.#socket.destroyed) {
      done?.(new SessionError(ERROR_CODES.sessionClosed, 'the session is closed'));
      return;
    }
    this.#socket.write(frame, done);
  }

  /** Chunks that arrived while frames were being handled (a write may deliver at once). */
  #pending: Buffer[] | undefined;

  #onData(chunk: Buffer): void {
    // Frames are handled in order, one chunk at a time: a chunk that arrives while one is
    // handled (a transport that delivers synchronously) waits for it.
    if (this.#pending !== undefined) return void this.#pending.push(chunk);
    this.#pending = [chunk];
    for (let next = this.#pending.shift(); next !== undefined; next = this.#pending.shift()) {
      this.#handle(next);
    }
    this.#pending = undefined;
  }

  #handle(chunk: Buffer): void {
    if (this.#closed) return;
    let frames: Frame[];
    try {
      frames = this.#reader.push(chunk);
    } catch (error) {
      if (!(error instanceof FrameError)) throw error;
      return void this.close(error.code, error.message);
    }
    for (const frame of frames) {
      if (this.#closed) return;
      this.#onFrame(frame);
    }
  }

  #onFrame(frame: Frame): void {
    const { type, streamId, body } = frame;
    if (type === FRAME_TYPES.goaway) {
      this.#goneAway = true;
      const code = body.readUInt32BE(4);
      const message = body.subarray(8).toString('utf8');
      this.#socket.end();
      return void this.#end(
        code === ERROR_CODES.none
          ? undefined
          : new SessionError(code, `GOAWAY ${errorName(code)}: ${message}`),
      );
    }
    let stream = this.#streams.get(streamId);
    if (stream === undefined && type === FRAME_TYPES.data && (frame.flags & FLAGS.syn) !== 0) {
      stream = this.#accept(streamId);
      if (stream === undefined) return;
    }
    if (stream === undefined) {
      // A frame for a stream that ended: DATA is answered with RST, the rest is late news.
      if (type === FRAME_TYPES.data) this.#reset(streamId, ERROR_CODES.streamClosed);
      return;
    }
    if (type === FRAME_TYPES.rst) return void stream.abort(body.readUInt32BE(0));
    if (type === FRAME_TYPES.wndinc) {
      this.#acknowledgeSoon(streamId);
      return void stream.grow(body.readUInt32BE(0) & 0x7fff_ffff);
    }
    const refusal = stream.receive(body, (frame.flags & FLAGS.fin) !== 0);
    if (refusal !== undefined) {
      this.#reset(streamId, refusal);
      stream.abort(refusal, `the peer broke the stream's rules: ${errorName(refusal)}`);
    }
  }

  /** A stream the peer opens; undefined when refused (RST sent, or the session closed). */
  #accept(id: number): MuxStream | undefined {
    if (id % 2 !== this.#peerParity || id <= this.#lastRemoteId) {
      this.close(ERROR_CODES.protocol, `stream ${id} is not a new stream of the peer`);
      return undefined;
    }
    this.#lastRemoteId = id;
    const refusal = this.#goneAway
      ? ERROR_CODES.streamRefused
      : this.#streams.size >= this.#limits.maxStreams
        ? ERROR_CODES.streamsExhausted
        : this.#unclaimed.size >= this.#limits.acceptQueue
          ? ERROR_CODES.acceptQueueFull
          : undefined;
    if (refusal !== undefined) {
      this.#reset(id, refusal);
      return undefined;
    }
    const stream = new MuxStream(this.#host, id, { window: this.#limits.window, opening: false });
    this.#streams.set(id, stream);
    this.#unclaimed.add(stream);
    this.emit('stream', stream);
    return stream;
  }

  #reset(id: number, code: ErrorCode): void {
    this.#send(encodeU32Frame(FRAME_TYPES.rst, id, code));
  }

  /** The connection is over: every stream ends with it. */
  #end(error: Error | undefined): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#goneAway = true;
    for (const stream of [...this.#streams.values()]) {
      stream.abort(ERROR_CODES.sessionClosed, 'the session closed');
    }
    this.#streams.clear();
    this.#unclaimed.clear();
    // A GOAWAY we wrote is let out before the connection goes (bounded: the peer may not read).
    if (this.#socket.writableEnded) setTimeout(() => this.#socket.destroy(), 2000).unref();
    else this.#socket.destroy();
    this.emit('close', error);
  }
}

export { StreamError };
