import type { Readable, Writable } from 'node:stream';

// ngrok's RPC over a typed stream: the caller writes one JSON object (and may leave its side
// open), the callee writes one JSON object back and ends its side. Requests are read until
// they parse, bounded in bytes and time; an answer is read to the stream's end.

/** Reads one JSON object from `stream`: the first prefix that parses, within the bounds. */
export function readJson(
  stream: Readable,
  { maxBytes, timeoutMs, toEnd = false }: { maxBytes: number; timeoutMs: number; toEnd?: boolean },
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(
      () => fail(new Error(`no complete message within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const done = () => {
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onEnd);
      stream.off('error', fail);
    };
    function fail(error: Error) {
      done();
      reject(error);
    }
    function parsed(): { value: unknown } | undefined {
      try {
        return { value: JSON.parse(Buffer.concat(chunks, size).toString('utf8')) };
      } catch {
        return undefined;
      }
    }
    function onData(chunk: Buffer) {
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) return fail(new Error(`the message is over ${maxBytes} bytes`));
      if (toEnd) return;
      const message = parsed();
      if (message === undefined) return;
      done();
      resolve(message.value);
    }
    function onEnd() {
      const message = parsed();
      done();
      if (message === undefined) reject(new Error('the stream ended without a JSON message'));
      else resolve(message.value);
    }
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('close', onEnd);
    stream.once('error', fail);
  });
}

/** Writes the answer and ends our side of the stream. */
export function answer(stream: Writable, body: unknown): void {
  stream.end(JSON.stringify(body));
}
