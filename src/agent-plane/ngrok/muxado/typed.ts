import type { Readable } from 'node:stream';
import type { MuxSession } from './session.ts';
import type { MuxStream } from './stream.ts';

// Typed streams: every stream starts with its type, a big-endian u32, written by whoever opens
// it. 0xFFFFFFFF is the heartbeat's; the rest are the application's (ngrok's RPCs and proxies).

/** The heartbeat stream's type. */
export const HEARTBEAT_TYPE = 0xffff_ffff;

/**
 * The next `count` bytes of `stream`; rejects when it ends first or `timeoutMs` passes (the
 * stream is then destroyed: a peer that opens streams and says nothing holds no place long).
 */
export function readExactly(stream: Readable, count: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`nothing read within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const done = () => {
      clearTimeout(timer);
      stream.off('readable', onReadable);
      stream.off('end', onEnd);
      stream.off('close', onEnd);
      stream.off('error', fail);
    };
    function fail(error: Error) {
      done();
      stream.destroy();
      reject(error);
    }
    function onEnd() {
      fail(new Error(`the stream ended before ${count} bytes`));
    }
    function onReadable() {
      const bytes = stream.read(count) as Buffer | null;
      if (bytes === null) return;
      done();
      if (bytes.length < count) return onEnd();
      resolve(bytes);
    }
    stream.on('readable', onReadable);
    stream.once('end', onEnd);
    stream.once('close', onEnd);
    stream.once('error', fail);
    onReadable();
  });
}

/** The type of a stream the peer opened (its first 4 bytes), then the stream is claimed. */
export async function acceptTyped(
  session: MuxSession,
  stream: MuxStream,
  timeoutMs: number,
): Promise<number> {
  const type = (await readExactly(stream, 4, timeoutMs)).readUInt32BE(0);
  session.claim(stream);
  return type;
}

/** Opens a stream of `type` to the peer. */
export function openTyped(session: MuxSession, type: number): MuxStream {
  const stream = session.openStream();
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(type >>> 0);
  stream.write(head);
  return stream;
}
