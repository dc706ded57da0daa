import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

// HTTP/1.1 over a bare TCP socket, for what fetch cannot do: send a body a byte at a time, stop
// mid-header, pipeline requests, hold a connection idle, and see exactly when the server closes.

/** One response read off the socket. */
export interface RawResponse {
  status: number;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  body: string;
}

/** A connection to the service. */
export interface RawConnection {
  readonly socket: Socket;
  /** Everything the server sent so far, as latin1 text. */
  received(): string;
  /** Writes unless the connection is closed; false once it is. */
  send(data: string | Buffer): boolean;
  /**
   * Sends `data` one byte every `intervalMs` until all is sent or the server closes the
   * connection; resolves with how many bytes went out.
   */
  trickle(data: string | Buffer, intervalMs: number): Promise<number>;
  /** The responses complete so far, in order. */
  responses(): RawResponse[];
  /** Waits for the `index`th (0-based) complete response. */
  response(index?: number, timeoutMs?: number): Promise<RawResponse>;
  /** Resolves with Date.now() when the server ends or resets the connection. */
  readonly closed: Promise<number>;
  isClosed(): boolean;
  destroy(): void;
}

/** Opens a TCP connection to an http:// URL's host and port. */
export async function openRaw(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let text = '';
  let isClosed = false;
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  const closed = new Promise<number>((resolve) => {
    const done = () => {
      isClosed = true;
      resolve(Date.now());
    };
    socket.once('end', done);
    socket.once('close', done);
    socket.on('error', () => {}); // a reset is a close here; 'close' follows
  });
  const send = (data: string | Buffer) => {
    if (isClosed || socket.destroyed) return false;
    socket.write(data);
    return true;
  };
  return {
    socket,
    received: () => text,
    send,
    async trickle(data, intervalMs) {
      const bytes = Buffer.from(data);
      let sent = 0;
      while (sent < bytes.length && send(bytes.subarray(sent, sent + 1))) {
        sent++;
        await sleep(intervalMs);
      }
      return sent;
    },
    responses: () => parseResponses(text, isClosed),
    async response(index = 0, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const all = parseResponses(text, isClosed);
        if (all.length > index) return all[index];
        if (isClosed) {
          throw new Error(`connection closed after ${all.length} responses; received:\n${text}`);
        }
        if (Date.now() > deadline) {
          throw new Error(`no response #${index} in ${timeoutMs} ms; received:\n${text}`);
        }
        await sleep(10);
      }
    },
    closed,
    isClosed: () => isClosed,
    destroy: () => socket.destroy(),
  };
}

/** Complete responses in `text` (Content-Length framed, or up to the close when it has none). */
function parseResponses(text: string, closed: boolean): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = headers['content-length'];
    const bodyStart = end + 4;
    if (length === undefined && !closed) return out;
    const bodyEnd = length === undefined ? rest.length : bodyStart + Number(length);
    if (rest.length < bodyEnd) return out;
    const status = Number(statusLine.split(' ')[1]);
    out.push({ status, headers, body: rest.slice(bodyStart, bodyEnd) });
    rest = rest.slice(bodyEnd);
  }
}

/** The head of a request with the given headers (Host and Connection: keep-alive added). */
export function requestHead(
  method: string,
  path: string,
  headers: Record<string, string | number> = {},
): string {
  const all = { host: 'localhost', connection: 'keep-alive', ...headers };
  const lines = Object.entries(all).map(([name, value]) => `${name}: ${value}\r\n`);
  return `${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n`;
}
