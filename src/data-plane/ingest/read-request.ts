import type { IncomingMessage } from 'node:http';
import { fromJsonString, toBinary } from '@bufbuild/protobuf';
import type { ConnectError } from '@connectrpc/connect';
import { PublishRequestSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { AppError } from '../../shared/errors.ts';
import type { Claim } from '../pipeline/admission.ts';
import { DECOMPRESSORS, type Wire } from './wire.ts';

// Reading ingest requests within their bounds. Every byte the service keeps is taken from the
// request's claim before it is kept (the whole body at once when Content-Length announces it,
// else chunk by chunk, decompressed output too); a message over MAX_INGEST_BYTES is refused
// before it is read. What the client got wrong (framing, compression, JSON) is INVALID_ARGUMENT.

/** The length prefix of a message frame: flags (1 byte) and length (4 bytes, big-endian). */
const HEADER = 5;
const COMPRESSED = 0x01;

/** What reading needs: the request's claim and the largest message (MAX_INGEST_BYTES). */
export interface ReadLimits {
  claim: Claim;
  maxBytes: number;
}

/** A message read from a request: a binary PublishRequest and the bytes its claim holds for it. */
export interface Message {
  bytes: Uint8Array;
  held: number;
}

/** The messages of a streaming request, read as the caller asks for them. */
export interface MessageReader {
  /** The next message, or undefined at the end of the body; throws a ConnectError. */
  next(): Promise<Message | undefined>;
  /** Stops reading: the rest of the body is left unread (see answer()). */
  stop(): void;
}

function invalid(message: string): ConnectError {
  return new AppError('ERR_INVALID_EVENTS', message).toConnect();
}

function tooLarge(maxBytes: number, what: string): ConnectError {
  const message = `${what} larger than ${maxBytes} bytes (MAX_INGEST_BYTES)`;
  return new AppError('ERR_BODY_TOO_LARGE', message).toConnect();
}

const clientGone = () => new AppError('ERR_CLIENT_GONE', 'the client went away').toConnect();

/** Decompresses a message, taking each piece of output from the claim as it is produced. */
function decompress(data: Uint8Array, encoding: string, limits: ReadLimits): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const inflater = DECOMPRESSORS[encoding]();
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      inflater.destroy();
      limits.claim.give(size);
      reject(error);
    };
    inflater.on('data', (chunk: Buffer) => {
      if (settled) return;
      if (size + chunk.length > limits.maxBytes) {
        fail(tooLarge(limits.maxBytes, 'message once decompressed'));
        return;
      }
      try {
        limits.claim.take(chunk.length);
      } catch (error) {
        fail(error);
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    });
    inflater.on('error', () => fail(invalid(`message is not valid ${encoding}`)));
    inflater.on('end', () => {
      settled = true;
      resolve(Buffer.concat(chunks, size));
    });
    inflater.end(data);
  });
}

function jsonToBinary(json: Uint8Array): Uint8Array {
  try {
    const text = Buffer.from(json.buffer, json.byteOffset, json.byteLength).toString('utf8');
    return toBinary(PublishRequestSchema, fromJsonString(PublishRequestSchema, text));
  } catch (error) {
    throw invalid(`malformed PublishRequest JSON: ${(error as Error).message}`);
  }
}

/** One message from its frame's flags and bytes (which the claim holds): decompressed, binary. */
async function openMessage(
  flags: number,
  data: Uint8Array,
  wire: Wire,
  limits: ReadLimits,
): Promise<Message> {
  let bytes = data;
  let held = data.length;
  if (flags === COMPRESSED) {
    if (wire.encoding === undefined) throw invalid('compressed message without an encoding');
    bytes = await decompress(data, wire.encoding, limits);
    limits.claim.give(held);
    held = bytes.length;
  } else if (flags !== 0) {
    throw invalid(`message frame with flags ${flags}: only 0 or 1 (compressed) are allowed`);
  }
  return { bytes: wire.binary ? bytes : jsonToBinary(bytes), held };
}

/** Reads a whole body of at most `limit` bytes, holding them on the claim. */
function readBody(request: IncomingMessage, claim: Claim, limit: number): Promise<Buffer> {
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  if (declared > limit) return Promise.reject(tooLarge(limit, 'request'));
  // Announced: the whole body is held before a byte of it is read, and read into one buffer.
  const announced = Number.isInteger(declared);
  if (announced) claim.take(declared);
  const body = announced ? Buffer.allocUnsafe(declared) : undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      request.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onClose);
    };
    const fail = (error: unknown) => {
      done();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > (body?.length ?? limit)) return fail(tooLarge(limit, 'request'));
      if (body !== undefined) chunk.copy(body, size);
      else {
        try {
          claim.take(chunk.length);
        } catch (error) {
          return fail(error);
        }
        chunks.push(chunk);
      }
      size += chunk.length;
    };
    const onEnd = () => {
      done();
      if (body !== undefined) resolve(body.subarray(0, size));
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onClose = () => fail(clientGone());
    request.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onClose);
  });
}

/** The one message of a unary request (a binary PublishRequest); its bytes stay on the claim. */
export async function readUnary(
  request: IncomingMessage,
  wire: Wire,
  limits: ReadLimits,
): Promise<Uint8Array> {
  if (wire.framing === 'connect') {
    const body = await readBody(request, limits.claim, limits.maxBytes);
    return (await openMessage(wire.encoding ? COMPRESSED : 0, body, wire, limits)).bytes;
  }
  const body = await readBody(request, limits.claim, limits.maxBytes + HEADER);
  if (body.length < HEADER || body.readUInt32BE(1) !== body.length - HEADER) {
    throw invalid('a unary request must carry exactly one whole message frame');
  }
  return (await openMessage(body[0], body.subarray(HEADER), wire, limits)).bytes;
}

/**
 * Reads the message frames of a streaming request as they arrive. Received bytes are held on
 * the claim; a message's share moves to it (`held`) for the caller to give back once the
 * message is published. Reading pauses while a whole message waits for the caller.
 */
export function readMessages(
  request: IncomingMessage,
  wire: Wire,
  limits: ReadLimits,
): MessageReader {
  let chunks: Buffer[] = [];
  let size = 0;
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;

  /** The length of the frame at the head, once its header is in; throws when it is too big. */
  function frameLength(): number | undefined {
    if (size < HEADER) return undefined;
    if (chunks[0].length < HEADER) chunks = [Buffer.concat(chunks, size)];
    const length = chunks[0].readUInt32BE(1);
    if (length > limits.maxBytes) throw tooLarge(limits.maxBytes, 'message');
    return HEADER + length;
  }

  function fail(error: unknown): void {
    failure ??= error;
    wake?.();
  }

  const onData = (chunk: Buffer) => {
    try {
      limits.claim.take(chunk.length);
      chunks.push(chunk);
      size += chunk.length;
      const length = frameLength();
      if (length !== undefined && size >= length) {
        request.pause();
        wake?.();
      }
    } catch (error) {
      request.pause();
      fail(error);
    }
  };
  const onEnd = () => {
    ended = true;
    wake?.();
  };
  const onClose = () => {
    if (!ended) fail(clientGone());
  };
  request.pause();
  request.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onClose);

  /** The frame at the head, when it is whole: its flags and bytes; the rest stays buffered. */
  function takeFrame(): { flags: number; data: Buffer } | undefined {
    const length = frameLength();
    if (length === undefined || size < length) return undefined;
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    const rest = all.subarray(length);
    chunks = rest.length === 0 ? [] : [Buffer.from(rest)];
    size = rest.length;
    return { flags: all[0], data: all.subarray(HEADER, length) };
  }

  return {
    async next() {
      for (;;) {
        if (failure !== undefined) throw failure;
        const frame = takeFrame();
        if (frame !== undefined) {
          // The frame header's bytes are not kept: give them back at once.
          limits.claim.give(HEADER);
          return openMessage(frame.flags, frame.data, wire, limits);
        }
        if (ended) {
          if (size > 0) throw invalid('the request ends inside a message frame');
          return undefined;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          request.resume();
        });
        wake = undefined;
      }
    },
    stop() {
      request.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onClose);
      request.on('error', () => {});
    },
  };
}
