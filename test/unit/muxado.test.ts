import { once } from 'node:events';
import { duplexPair } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  ERROR_CODES,
  encodeFrame,
  encodeGoAway,
  encodeU32Frame,
  FLAGS,
  FRAME_TYPES,
} from '../../src/agent-plane/ngrok/muxado/frame.ts';
import { type FrameError, FrameReader } from '../../src/agent-plane/ngrok/muxado/frame-reader.ts';
import {
  echoHeartbeats,
  heartbeatTimeout,
  watchHeartbeats,
} from '../../src/agent-plane/ngrok/muxado/heartbeat.ts';
import {
  DEFAULT_LIMITS,
  MuxSession,
  type SessionLimits,
} from '../../src/agent-plane/ngrok/muxado/session.ts';
import type { MuxStream } from '../../src/agent-plane/ngrok/muxado/stream.ts';
import {
  acceptTyped,
  HEARTBEAT_TYPE,
  openTyped,
  readExactly,
} from '../../src/agent-plane/ngrok/muxado/typed.ts';
import { answer, readJson } from '../../src/agent-plane/ngrok/rpc.ts';

// muxado as the server speaks it: frames, flow control, the limits, GOAWAY. A client session of
// the same module plays the agent over an in-memory connection, and raw frames play a broken one.

function pair(limits: SessionLimits = DEFAULT_LIMITS) {
  const [serverEnd, clientEnd] = duplexPair();
  const server = new MuxSession(serverEnd, limits, 'server');
  const client = new MuxSession(clientEnd, DEFAULT_LIMITS, 'client');
  return { server, client, serverEnd, clientEnd };
}

/** The server side of a raw connection: frames written to `raw` reach the server session. */
function raw(limits: SessionLimits = DEFAULT_LIMITS) {
  const [serverEnd, rawEnd] = duplexPair();
  const server = new MuxSession(serverEnd, limits, 'server');
  const received: Buffer[] = [];
  rawEnd.on('data', (chunk: Buffer) => received.push(chunk));
  const frames = () => new FrameReader(1 << 24).push(Buffer.concat(received));
  return { server, rawEnd, frames };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('muxado frames', () => {
  it('reads frames split anywhere across chunks, and refuses malformed headers', () => {
    const bytes = Buffer.concat([
      encodeFrame(FRAME_TYPES.data, FLAGS.syn, 3, Buffer.from('hello')),
      encodeU32Frame(FRAME_TYPES.wndinc, 3, 5),
      encodeGoAway(3, ERROR_CODES.none, 'bye'),
    ]);
    for (let cut = 0; cut <= bytes.length; cut += 1) {
      const reader = new FrameReader(1024);
      const frames = [...reader.push(bytes.subarray(0, cut)), ...reader.push(bytes.subarray(cut))];
      expect(frames.map((f) => [f.type, f.flags, f.streamId, f.body.length])).toEqual([
        [FRAME_TYPES.data, FLAGS.syn, 3, 5],
        [FRAME_TYPES.wndinc, 0, 3, 4],
        [FRAME_TYPES.goaway, 0, 0, 11],
      ]);
    }
    const refused = (frame: Buffer, max = 1024) => {
      try {
        new FrameReader(max).push(frame);
        return undefined;
      } catch (error) {
        return (error as FrameError).code;
      }
    };
    expect(refused(encodeFrame(FRAME_TYPES.data, 0, 0, Buffer.from('x')))).toBe(
      ERROR_CODES.protocol,
    );
    expect(refused(encodeFrame(FRAME_TYPES.rst, 0, 1, Buffer.alloc(3)))).toBe(ERROR_CODES.protocol);
    expect(refused(encodeFrame(FRAME_TYPES.goaway, 0, 1, Buffer.alloc(8)))).toBe(
      ERROR_CODES.protocol,
    );
    expect(refused(encodeFrame(9 as never, 0, 1))).toBe(ERROR_CODES.protocol);
    expect(refused(encodeFrame(FRAME_TYPES.data, 0, 1, Buffer.alloc(2000)))).toBe(
      ERROR_CODES.frameSize,
    );
    // The size is refused from the header alone: the body is never waited for.
    expect(refused(encodeFrame(FRAME_TYPES.data, 0, 1, Buffer.alloc(2000)).subarray(0, 8))).toBe(
      ERROR_CODES.frameSize,
    );
  });
});

describe('muxado sessions', () => {
  it('carries typed streams both ways, with half-close', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const opened = openTyped(client, 7);
    opened.end('request');
    const [stream] = (await accepted) as [MuxStream];
    expect(stream.id).toBe(1);
    expect(await acceptTyped(server, stream, 1000)).toBe(7);
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    await once(stream, 'end');
    expect(Buffer.concat(chunks).toString()).toBe('request');
    const streamClosed = once(stream, 'close');
    stream.end('answer');
    const answer: Buffer[] = [];
    opened.on('data', (chunk: Buffer) => answer.push(chunk));
    await once(opened, 'end');
    expect(Buffer.concat(answer).toString()).toBe('answer');
    await streamClosed;
    expect(server.streamCount).toBe(0);
    // The server's own streams are even.
    const back = once(client, 'stream');
    openTyped(server, 3).end();
    expect(((await back) as [MuxStream])[0].id).toBe(2);
  });

  it('moves more than a window through flow control, without loss', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const opened = client.openStream();
    const payload = Buffer.alloc(3 * DEFAULT_LIMITS.window + 12345, 7);
    for (let i = 0; i < payload.length; i += 1) payload[i] = i % 251;
    opened.end(payload);
    const [stream] = (await accepted) as [MuxStream];
    server.claim(stream);
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    await once(stream, 'end');
    expect(Buffer.concat(chunks).equals(payload)).toBe(true);
  });

  it('resets a stream whose peer writes past its window', async () => {
    const { server, rawEnd, frames } = raw();
    const streams: MuxStream[] = [];
    server.on('stream', (stream) => {
      streams.push(stream);
      stream.on('error', () => {});
      stream.pause();
    });
    rawEnd.write(encodeFrame(FRAME_TYPES.data, FLAGS.syn, 1, Buffer.alloc(200_000)));
    rawEnd.write(encodeFrame(FRAME_TYPES.data, 0, 1, Buffer.alloc(100_000)));
    await tick();
    await tick();
    const rst = frames().find((f) => f.type === FRAME_TYPES.rst);
    expect(rst?.body.readUInt32BE(0)).toBe(ERROR_CODES.flowControl);
    expect(streams[0].destroyed).toBe(true);
  });

  it('refuses streams past the limit and past the accept queue, and keeps serving', async () => {
    const limits = { ...DEFAULT_LIMITS, maxStreams: 3, acceptQueue: 2 };
    const { server, rawEnd, frames } = raw(limits);
    const streams: MuxStream[] = [];
    server.on('stream', (stream) => streams.push(stream));
    const open = (id: number) =>
      rawEnd.write(encodeFrame(FRAME_TYPES.data, FLAGS.syn, id, Buffer.from([0, 0, 0, 1])));
    open(1);
    open(3);
    open(5); // the accept queue holds 2 unclaimed streams
    await tick();
    server.claim(streams[0]);
    open(7); // claimed one: room in the queue, the stream limit (3) reached
    open(9);
    await tick();
    const resets = frames()
      .filter((f) => f.type === FRAME_TYPES.rst)
      .map((f) => [f.streamId, f.body.readUInt32BE(0)]);
    expect(resets).toEqual([
      [5, ERROR_CODES.acceptQueueFull],
      [9, ERROR_CODES.streamsExhausted],
    ]);
    expect(streams.map((s) => s.id)).toEqual([1, 3, 7]);
    expect(server.open).toBe(true);
  });

  it('answers a malformed frame with GOAWAY and ends the session', async () => {
    const { server, rawEnd, frames } = raw();
    const closed = once(server, 'close');
    rawEnd.write(encodeFrame(FRAME_TYPES.data, FLAGS.syn, 2, Buffer.from('even id')));
    const [error] = (await closed) as [Error];
    expect(error.message).toMatch(/not a new stream/);
    await tick();
    const goAway = frames().find((f) => f.type === FRAME_TYPES.goaway);
    expect(goAway?.body.readUInt32BE(4)).toBe(ERROR_CODES.protocol);
  });

  it('sends GOAWAY at close, ends its streams, and refuses new ones', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const opened = openTyped(client, 1);
    const [stream] = (await accepted) as [MuxStream];
    const errors: Error[] = [];
    stream.on('error', (error) => errors.push(error));
    opened.on('error', () => {});
    const clientClosed = once(client, 'close');
    server.close(ERROR_CODES.none, 'shutting down');
    expect(server.open).toBe(false);
    expect(() => server.openStream()).toThrow(/closed/);
    await clientClosed;
    await tick();
    expect(stream.destroyed).toBe(true);
    expect(errors.map((e) => e.message)).toEqual(['the session closed']);
  });

  it('reads exactly, or fails when the stream ends short or stays silent', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const quiet = () => client.openStream().on('error', () => {});
    quiet().end(Buffer.from([1, 2]));
    const [stream] = (await accepted) as [MuxStream];
    await expect(readExactly(stream, 4, 1000)).rejects.toThrow(/ended before 4 bytes/);
    const second = once(server, 'stream');
    quiet().write(Buffer.from([1]));
    const [silent] = (await second) as [MuxStream];
    await expect(readExactly(silent, 4, 50)).rejects.toThrow(/nothing read within 50 ms/);
    expect(silent.destroyed).toBe(true);
  });
});

describe('RPC and heartbeats over typed streams', () => {
  it('reads a request that parses before its stream ends, and bounds it', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const opened = openTyped(client, 0);
    opened.on('error', () => {});
    opened.write('{"Version":["3",');
    const [stream] = (await accepted) as [MuxStream];
    expect(await acceptTyped(server, stream, 1000)).toBe(0);
    const request = readJson(stream, { maxBytes: 1024, timeoutMs: 1000 });
    opened.write('"2"],"ClientId":""}');
    expect(await request).toEqual({ Version: ['3', '2'], ClientId: '' });
    answer(stream, { Version: '3' });
    expect(await readJson(opened, { maxBytes: 1024, timeoutMs: 1000, toEnd: true })).toEqual({
      Version: '3',
    });
    const big = once(server, 'stream');
    const second = openTyped(client, 1);
    second.on('error', () => {});
    second.write(`{"x":"${'a'.repeat(2000)}"}`);
    const [bigStream] = (await big) as [MuxStream];
    await acceptTyped(server, bigStream, 1000);
    await expect(readJson(bigStream, { maxBytes: 1024, timeoutMs: 1000 })).rejects.toThrow(
      /over 1024 bytes/,
    );
  });

  it("answers the peer's WNDINCs with one empty WNDINC per turn, so the ACK goes at once", async () => {
    const { server, rawEnd, frames } = raw();
    const stream = server.openStream();
    stream.write('request');
    await tick();
    const wndincs = () =>
      frames()
        .filter((f) => f.type === FRAME_TYPES.wndinc)
        .map((f) => [f.streamId, f.body.readUInt32BE(0)]);
    expect(wndincs()).toEqual([]);
    // Two WNDINCs in one turn (Nagle's peer waits for the ACK of its last one): one answer.
    rawEnd.write(
      Buffer.concat([
        encodeU32Frame(FRAME_TYPES.wndinc, stream.id, 3),
        encodeU32Frame(FRAME_TYPES.wndinc, stream.id, 4),
      ]),
    );
    await tick();
    await tick();
    expect(wndincs()).toEqual([[stream.id, 0]]);
    // Its window grew by both: 7 bytes more than it had.
    stream.write(Buffer.alloc(256 * 1024 - 'request'.length + 7));
    await tick();
    const sent = frames().filter((f) => f.type === FRAME_TYPES.data);
    expect(sent.reduce((sum, f) => sum + f.body.length, 0)).toBe(256 * 1024 + 7);
  });

  it('echoes heartbeats, and calls time when they stop', async () => {
    const { server, client } = pair();
    const accepted = once(server, 'stream');
    const beats = openTyped(client, HEARTBEAT_TYPE);
    const [stream] = (await accepted) as [MuxStream];
    expect(await acceptTyped(server, stream, 1000)).toBe(HEARTBEAT_TYPE);
    let timedOut = false;
    const watch = watchHeartbeats(() => {
      timedOut = true;
    }, 150);
    echoHeartbeats(stream, () => watch.beat());
    for (let i = 0; i < 3; i += 1) {
      beats.write(Buffer.from([1, 2, 3, i]));
      const [echo] = (await once(beats, 'data')) as [Buffer];
      expect([...echo]).toEqual([1, 2, 3, i]);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(timedOut).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(timedOut).toBe(true);
    expect(heartbeatTimeout(10_000, 15_000)).toBe(25_000);
    expect(heartbeatTimeout(1, 1)).toBe(2_000);
    expect(heartbeatTimeout(Number.NaN, 0)).toBe(5 * 60_000);
  });
});
