import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../../shared/logger.ts';
import { NgrokRefusal, ngrokError } from './messages.ts';
import type { MuxStream } from './muxado/stream.ts';

// ngrok's RPC over a typed stream: the caller writes one JSON object (and may leave its side
// open), the callee writes one JSON object back and ends its side. Requests are read until
// they parse, bounded in bytes and time; an answer is read to the stream's end.

/** The most bytes of one RPC request (a Bind with a traffic policy is the largest). */
const MAX_REQUEST_BYTES = 256 * 1024;
/** How long an agent has to send a whole request once its stream is open, ms. */
const REQUEST_TIMEOUT_MS = 10_000;

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

/** Serves one RPC on `stream`: its request, the handler's answer or its refusal, a half-close. */
export async function serveRpc<T>(
  stream: MuxStream,
  handler: (request: T) => Promise<object>,
  logger: Logger,
): Promise<void> {
  const request = (await readJson(stream, {
    maxBytes: MAX_REQUEST_BYTES,
    timeoutMs: REQUEST_TIMEOUT_MS,
  })) as T | null;
  try {
    answer(stream, await handler(request ?? ({} as T)));
  } catch (error) {
    if (error instanceof NgrokRefusal) return answer(stream, error.answer());
    logger.error({ err: error }, 'ngrok agent request failed');
    answer(stream, ngrokError('the server failed to handle the request; retry'));
  }
}
