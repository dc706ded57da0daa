import { duplexPair } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeFrame,
  encodeGoAway,
  encodeU32Frame,
  FLAGS,
  FRAME_TYPES,
} from '../../src/agent-plane/ngrok/muxado/frame.ts';
import { FrameReader } from '../../src/agent-plane/ngrok/muxado/frame-reader.ts';
import { DEFAULT_LIMITS, MuxSession } from '../../src/agent-plane/ngrok/muxado/session.ts';
import { acceptTyped } from '../../src/agent-plane/ngrok/muxado/typed.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// The agent listener's muxado session under hostile bytes: frames of every type with wrong
// lengths, ids, flags and windows, cut anywhere, mixed with random bytes. Nothing a peer sends
// may throw out of the session or grow it past its limits: a malformed frame ends the session
// with GOAWAY, a stream's fault resets that stream, and the session's state stays consistent
// (its streams within the limit, each live stream still readable). FUZZ_SEED=<n> replays a run.

const LIMITS = { ...DEFAULT_LIMITS, maxStreams: 8, acceptQueue: 4, window: 4096 };

/** One frame a peer might send, valid or not. */
const frame = fc.oneof(
  fc
    .record({
      id: fc.integer({ min: 0, max: 20 }),
      flags: fc.integer({ min: 0, max: 15 }),
      body: fc.uint8Array({ maxLength: 6000 }),
    })
    .map(({ id, flags, body }) => encodeFrame(FRAME_TYPES.data, flags, id, Buffer.from(body))),
  fc
    .record({ id: fc.integer({ min: 0, max: 20 }), value: fc.nat() })
    .map(({ id, value }) => encodeU32Frame(FRAME_TYPES.wndinc, id, value)),
  fc
    .record({ id: fc.integer({ min: 0, max: 20 }), code: fc.nat() })
    .map(({ id, code }) => encodeU32Frame(FRAME_TYPES.rst, id, code)),
  fc
    .record({ id: fc.nat(), code: fc.nat(), text: fc.string({ maxLength: 40 }) })
    .map(({ id, code, text }) => encodeGoAway(id, code as never, text)),
  // Typed stream openings: the start of every well-behaved stream.
  fc.record({ id: fc.integer({ min: 0, max: 20 }), type: fc.nat() }).map(({ id, type }) => {
    const body = Buffer.alloc(4);
    body.writeUInt32BE(type);
    return encodeFrame(FRAME_TYPES.data, FLAGS.syn, id, body);
  }),
  // A header whose length, type or id says something else than what follows.
  fc.uint8Array({ minLength: 8, maxLength: 8 }).map((bytes) => Buffer.from(bytes)),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
);

/** The bytes, cut into chunks at the given points. */
function chunked(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    if (point > from) chunks.push(bytes.subarray(from, point));
    from = point;
  }
  return chunks;
}

describe('muxado under malformed frames', () => {
  it('never throws, ends with GOAWAY on a malformed frame, and keeps its limits', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(frame, { maxLength: 30 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (frames, cuts) => {
          const [serverEnd, peerEnd] = duplexPair();
          const session = new MuxSession(serverEnd, LIMITS, 'server');
          const answered: Buffer[] = [];
          peerEnd.on('data', (chunk: Buffer) => answered.push(chunk));
          peerEnd.on('error', () => {});
          let closedWith: Error | undefined | null = null;
          session.on('close', (error) => {
            closedWith = error;
          });
          let maxStreams = 0;
          session.on('stream', (stream) => {
            stream.on('error', () => {});
            maxStreams = Math.max(maxStreams, session.streamCount);
            // Half the streams are claimed by type, as the agent listener does.
            if (stream.id % 4 === 1) acceptTyped(session, stream, 50).catch(() => {});
          });
          for (const chunk of chunked(Buffer.concat(frames), cuts)) peerEnd.write(chunk);
          await new Promise((resolve) => setImmediate(resolve));
          expect(maxStreams).toBeLessThanOrEqual(LIMITS.maxStreams);
          expect(session.streamCount).toBeLessThanOrEqual(LIMITS.maxStreams);
          // What the session answered is well-formed muxado.
          const replies = new FrameReader(1 << 24).push(Buffer.concat(answered));
          if (closedWith !== null && closedWith !== undefined) {
            // A session that ended on an error said why with GOAWAY, unless the peer's GOAWAY
            // ended it.
            const sentGoAway = replies.some((reply) => reply.type === FRAME_TYPES.goaway);
            expect(sentGoAway || /GOAWAY/.test((closedWith as Error).message)).toBe(true);
          }
          session.close();
        },
      ),
      fuzzParams(400),
    );
  });
});
