import { once } from 'node:events';
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StreamSocket } from '../../src/agent-plane/edge/stream-socket.ts';

// The socket-like wrapper of an SSH channel. A plain Duplex stands in for ssh2's channel: like
// ssh2, it delivers the far end's bytes by push() from inside the caller's stack (ssh2's packet
// parser), which is what a throw must never climb back into.

/** A tick: a stream starts flowing on the next one, as ssh2's channels have long done. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A channel whose far end the test plays with push(); what the edge wrote is in `written`. */
function channel() {
  const written: Buffer[] = [];
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk);
      done();
    },
  });
  return { stream, written };
}

describe('StreamSocket', () => {
  it('keeps a throw of what a chunk sets off from the channel, and fails only its socket', async () => {
    const { stream } = channel();
    const faults: unknown[] = [];
    const socket = new StreamSocket(stream, (error) => faults.push(error));
    socket.on('error', () => {});
    socket.on('data', () => {
      throw new Error('a handler failed');
    });
    await tick();
    expect(() => stream.push(Buffer.from('HTTP/1.1 200 OK\r\n'))).not.toThrow();
    expect(socket.destroyed).toBe(true);
    expect(faults).toEqual([new Error('a handler failed')]);
  });

  it('ends when the far end sends EOF, after what it sent was read', async () => {
    const { stream } = channel();
    const socket = new StreamSocket(stream, () => {});
    const read: string[] = [];
    socket.on('data', (chunk: Buffer) => read.push(chunk.toString()));
    stream.push(Buffer.from('the last answer'));
    stream.push(null);
    await once(socket, 'close');
    expect(read).toEqual(['the last answer']);
  });

  it('is destroyed at once when idle and its far end speaks or closes', async () => {
    for (const farEnd of ['data', 'end', 'close']) {
      const { stream } = channel();
      const socket = new StreamSocket(stream, () => {});
      socket.idle = true;
      await tick();
      if (farEnd === 'data') stream.push(Buffer.from('unasked'));
      else stream.emit(farEnd);
      expect(socket.destroyed, farEnd).toBe(true);
    }
  });

  it('times out after its idle time without a byte either way, as net.Socket does', async () => {
    const { stream } = channel();
    const socket = new StreamSocket(stream, () => {});
    socket.setTimeout(30);
    const started = Date.now();
    socket.write('a request');
    await once(socket, 'timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    expect(socket.timeout).toBe(30);
  });
});
