// muxado's frame: an 8-byte header (a 24-bit body length, the type in the high nibble of the
// next byte and the flags in its low nibble, a 32-bit stream id whose top bit is reserved; all
// big-endian), then the body. Four types: RST (a stream's error code), DATA, WNDINC (a window
// increment) and GOAWAY (the last stream id the sender processed, an error code, a message).
// The flag values are those of ngrok's implementations (FIN 0x1, SYN 0x2); muxado's
// PROTOCOL.md says otherwise and nothing speaks it that way.

/** The bytes of a frame's header. */
export const HEADER_BYTES = 8;

/** The frame types muxado defines. */
export const FRAME_TYPES = { rst: 0, data: 1, wndinc: 2, goaway: 3 } as const;
export type FrameType = (typeof FRAME_TYPES)[keyof typeof FRAME_TYPES];

/** FIN: the sender writes no more on the stream; SYN: the frame opens the stream. */
export const FLAGS = { fin: 0x1, syn: 0x2 } as const;

/** The largest stream id and window increment (the top bit of both is reserved). */
export const ID_MAX = 0x7fff_ffff;

/** The largest body the 24-bit length can say. */
export const LENGTH_MAX = 0xff_ffff;

/** muxado's error codes, as RST and GOAWAY carry them. */
export const ERROR_CODES = {
  none: 0x0,
  protocol: 0x1,
  internal: 0x2,
  flowControl: 0x3,
  streamClosed: 0x4,
  streamRefused: 0x5,
  streamCancelled: 0x6,
  streamReset: 0x7,
  frameSize: 0x8,
  acceptQueueFull: 0x9,
  enhanceYourCalm: 0xa,
  remoteGoneAway: 0xb,
  streamsExhausted: 0xc,
  writeTimeout: 0xd,
  sessionClosed: 0xe,
  peerEof: 0xf,
} as const;
export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/** The name of an error code, for logs and errors ('unknown' past the defined ones). */
export function errorName(code: number): string {
  const entry = Object.entries(ERROR_CODES).find(([, value]) => value === code);
  return entry === undefined ? `unknown (${code})` : entry[0];
}

/** One decoded frame. */
export interface Frame {
  type: FrameType;
  flags: number;
  streamId: number;
  body: Buffer;
}

/** A header and its body as one buffer. */
export function encodeFrame(type: FrameType, flags: number, streamId: number, body?: Buffer) {
  const length = body?.length ?? 0;
  if (length > LENGTH_MAX) throw new RangeError(`a frame body holds at most ${LENGTH_MAX} bytes`);
  const frame = Buffer.allocUnsafe(HEADER_BYTES + length);
  frame.writeUIntBE(length, 0, 3);
  frame[3] = (type << 4) | (flags & 0x0f);
  frame.writeUInt32BE(streamId & ID_MAX, 4);
  body?.copy(frame, HEADER_BYTES);
  return frame;
}

/** A frame whose body is one u32 (RST's error code, WNDINC's increment). */
export function encodeU32Frame(type: FrameType, streamId: number, value: number): Buffer {
  const body = Buffer.allocUnsafe(4);
  body.writeUInt32BE(value >>> 0);
  return encodeFrame(type, 0, streamId, body);
}

/** GOAWAY: the last stream id processed, why, and a message (its first KiB). */
export function encodeGoAway(lastStreamId: number, code: ErrorCode, message: string): Buffer {
  const text = Buffer.from(message, 'utf8').subarray(0, 1024);
  const body = Buffer.allocUnsafe(8 + text.length);
  body.writeUInt32BE(lastStreamId & ID_MAX, 0);
  body.writeUInt32BE(code, 4);
  text.copy(body, 8);
  return encodeFrame(FRAME_TYPES.goaway, 0, 0, body);
}
