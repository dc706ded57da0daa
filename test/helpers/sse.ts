/** One Server-Sent Event as read: its name and its data parsed as JSON. */
export interface SseEvent {
  event: string;
  data: any;
}

/** A Server-Sent Events stream read with fetch (as the console reads it: headers allowed). */
export interface SseStream {
  status: number;
  /** The body, when the answer is not a stream (an error). */
  body: any;
  headers: Headers;
  /** The next event, or undefined when the stream ended; rejects after `timeoutMs`. */
  next(timeoutMs?: number): Promise<SseEvent | undefined>;
  /** Every event until the stream ends (or `timeoutMs` passes: rejects). */
  rest(timeoutMs?: number): Promise<SseEvent[]>;
  close(): void;
}

/** Opens `url` and reads its answer as an event stream (or as JSON when it is not one). */
export async function openSse(url: string, init: RequestInit = {}): Promise<SseStream> {
  const abort = new AbortController();
  const response = await fetch(url, { ...init, signal: abort.signal });
  const stream = response.headers.get('content-type')?.startsWith('text/event-stream');
  const body = stream ? undefined : await response.json();
  const reader = stream
    ? response.body!.pipeThrough(new TextDecoderStream()).getReader()
    : undefined;
  let buffer = '';
  const queued: SseEvent[] = [];
  let ended = !stream;

  async function fill(): Promise<void> {
    while (queued.length === 0 && !ended) {
      const boundary = buffer.indexOf('\n\n');
      if (boundary >= 0) {
        const block = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary + 2);
        const lines = block.split('\n').filter((line) => !line.startsWith(':'));
        if (lines.length === 0) continue;
        const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? 'message';
        const data = lines
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n');
        queued.push({ event, data: JSON.parse(data) });
        continue;
      }
      const chunk = await reader!.read().catch(() => ({ done: true, value: undefined }));
      if (chunk.done) ended = true;
      else buffer += chunk.value;
    }
  }

  async function next(timeoutMs = 5_000): Promise<SseEvent | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no event within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([fill(), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return queued.shift();
  }

  return {
    status: response.status,
    body,
    headers: response.headers,
    next,
    async rest(timeoutMs = 5_000) {
      const all: SseEvent[] = [];
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const event = await next(Math.max(1, deadline - Date.now()));
        if (event === undefined) return all;
        all.push(event);
      }
    },
    close: () => abort.abort(),
  };
}
