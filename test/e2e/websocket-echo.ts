import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

// A WebSocket echo for an agent's local server (RFC 6455, unfragmented frames under 64 KiB, as
// the tests send), counting the bytes each way after the handshake; and Node's own WebSocket
// client pointed at the edge for a hostname that resolves nowhere.

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const CLOSE = 0x8;

/** Bytes after the handshake, as the local server saw them. */
export interface EchoTally {
  received: number;
  sent: number;
}

/** One client frame off the front of `buffer` (unmasked), or undefined until it is whole. */
function readFrame(buffer: Buffer): { opcode: number; payload: Buffer; size: number } | undefined {
  if (buffer.length < 2) return undefined;
  const opcode = buffer[0] & 0x0f;
  let length = buffer[1] & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = buffer.readUInt16BE(2);
    offset = 4;
  }
  const masked = (buffer[1] & 0x80) !== 0;
  const mask = masked ? buffer.subarray(offset, offset + 4) : undefined;
  offset += masked ? 4 : 0;
  if (buffer.length < offset + length) return undefined;
  const payload = Buffer.from(buffer.subarray(offset, offset + length));
  if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
  return { opcode, payload, size: offset + length };
}

/** A server frame (never masked). */
function frame(opcode: number, payload: Buffer): Buffer {
  const head =
    payload.length < 126
      ? Buffer.from([0x80 | opcode, payload.length])
      : Buffer.from([0x80 | opcode, 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, payload]);
}

/** Answers a WebSocket Upgrade and echoes every message; `tally` counts the bytes. */
export function echoWebSocket(request: IncomingMessage, socket: Duplex, tally: EchoTally): void {
  const accept = createHash('sha1')
    .update(`${request.headers['sec-websocket-key']}${ACCEPT_GUID}`)
    .digest('base64');
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  const send = (bytes: Buffer) => {
    tally.sent += bytes.length;
    socket.write(bytes);
  };
  let pending = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    tally.received += chunk.length;
    pending = Buffer.concat([pending, chunk]);
    for (let next = readFrame(pending); next; next = readFrame(pending)) {
      pending = pending.subarray(next.size);
      send(frame(next.opcode, next.payload));
      if (next.opcode === CLOSE) socket.end();
    }
  });
  socket.on('error', () => socket.destroy());
}

/**
 * Node's WebSocket client (undici's) to `url`, connecting to 127.0.0.1 whatever the URL's host:
 * the Host header names the hostname the edge routes on. undici's Agent is not importable; the
 * global dispatcher Node creates on its first fetch is one.
 */
export async function webSocketVia(url: string): Promise<WebSocket> {
  await (await fetch('data:,')).text();
  const dispatcherKey = Symbol.for('undici.globalDispatcher.1');
  const Agent = (globalThis as Record<symbol, { constructor: new (options: object) => object }>)[
    dispatcherKey
  ].constructor;
  const lookup = (
    _host: string,
    options: { all?: boolean },
    done: (error: null, address: unknown, family?: number) => void,
  ) =>
    options?.all ? done(null, [{ address: '127.0.0.1', family: 4 }]) : done(null, '127.0.0.1', 4);
  const dispatcher = new Agent({ connect: { lookup } });
  return new WebSocket(url, { dispatcher } as unknown as string[]);
}
