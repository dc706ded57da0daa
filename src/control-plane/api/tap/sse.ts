import type { FastifyReply, FastifyRequest } from 'fastify';

// Server-Sent Events over a hijacked reply: Fastify writes nothing more, this module writes the
// head, the events and a comment every KEEPALIVE_MS so proxies keep an idle stream open.

const KEEPALIVE_MS = 15_000;

/** An open event stream. */
export interface EventStream {
  /** Writes one event; `data` is one line of JSON. Dropped while the reader lags (lossy). */
  send(event: string, data: string): void;
  /** Ends the stream (the reader sees it close). */
  end(): void;
  /** Called once when the stream closes, by end() or because the reader went away. */
  onClose(listener: () => void): void;
}

/** Answers 200 text/event-stream and returns the stream; the caller has checked everything. */
export function openEventStream(request: FastifyRequest, reply: FastifyReply): EventStream {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'ngrok-operation-id': request.id,
  });
  raw.flushHeaders();
  const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS);
  const listeners: (() => void)[] = [];
  raw.once('close', () => {
    clearInterval(keepalive);
    for (const listener of listeners) listener();
  });
  return {
    send(event, data) {
      if (!raw.writableEnded && !raw.writableNeedDrain)
        raw.write(`event: ${event}\ndata: ${data}\n\n`);
    },
    end: () => raw.end(),
    onClose: (listener) => listeners.push(listener),
  };
}
