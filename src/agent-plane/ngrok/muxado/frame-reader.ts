import {
  ERROR_CODES,
  type ErrorCode,
  FRAME_TYPES,
  type Frame,
  type FrameType,
  HEADER_BYTES,
  ID_MAX,
} from './frame.ts';

// Frames out of a byte stream, checked before their body is waited for: a header that breaks
// the protocol (an unknown type, a stream id where none belongs or none where one must be, a
// body of the wrong length for its type) or announces a body over the session's limit is an
// error of the whole session (the reader's owner sends GOAWAY and closes), never a frame.

/** A malformed frame: the session ends with GOAWAY carrying `code`. */
export class FrameError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

/** Why a header is not one muxado allows; undefined when it is. */
function headerRefusal(type: number, streamId: number, length: number): string | undefined {
  switch (type) {
    case FRAME_TYPES.rst:
    case FRAME_TYPES.wndinc:
      if (streamId === 0) return 'a RST or WNDINC frame on stream 0';
      return length === 4 ? undefined : `a RST or WNDINC frame of ${length} bytes (not 4)`;
    case FRAME_TYPES.data:
      return streamId === 0 ? 'a DATA frame on stream 0' : undefined;
    case FRAME_TYPES.goaway:
      if (streamId !== 0) return 'a GOAWAY frame on a stream';
      return length >= 8 ? undefined : `a GOAWAY frame of ${length} bytes (under 8)`;
    default:
      return `an unknown frame type ${type}`;
  }
}

/** Parses frames from chunks as they arrive; at most `maxBody` bytes of body per frame. */
export class FrameReader {
  readonly #maxBody: number;
  /** Received bytes not yet part of a returned frame, in arrival order. */
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** The header of the frame whose body is awaited. */
  #header: { type: FrameType; flags: number; streamId: number; length: number } | undefined;

  constructor(maxBody: number) {
    this.#maxBody = maxBody;
  }

  /** The frames `chunk` completes; throws FrameError at the first malformed header. */
  push(chunk: Buffer): Frame[] {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.#header === undefined) {
        if (this.#buffered < HEADER_BYTES) return frames;
        this.#header = this.#readHeader(this.#take(HEADER_BYTES));
      }
      if (this.#buffered < this.#header.length) return frames;
      const { length, ...header } = this.#header;
      this.#header = undefined;
      frames.push({ ...header, body: this.#take(length) });
    }
  }

  #readHeader(bytes: Buffer) {
    const length = bytes.readUIntBE(0, 3);
    const type = bytes[3] >> 4;
    const flags = bytes[3] & 0x0f;
    const streamId = bytes.readUInt32BE(4) & ID_MAX;
    const refusal = headerRefusal(type, streamId, length);
    if (refusal !== undefined) throw new FrameError(ERROR_CODES.protocol, refusal);
    if (length > this.#maxBody) {
      throw new FrameError(
        ERROR_CODES.frameSize,
        `a frame of ${length} bytes (this server reads at most ${this.#maxBody})`,
      );
    }
    return { type: type as FrameType, flags, streamId, length };
  }

  /** The next `count` buffered bytes (copied only when they span chunks). */
  #take(count: number): Buffer {
    this.#buffered -= count;
    const first = this.#chunks[0];
    if (count === 0) return Buffer.alloc(0);
    if (first.length >= count) {
      if (first.length === count) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(count);
      return first.subarray(0, count);
    }
    const out = Buffer.allocUnsafe(count);
    let filled = 0;
    while (filled < count) {
      const chunk = this.#chunks[0];
      const part = Math.min(chunk.length, count - filled);
      chunk.copy(out, filled, 0, part);
      filled += part;
      if (part === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(part);
    }
    return out;
  }
}
