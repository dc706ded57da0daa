// The server name (SNI) of a TLS ClientHello, read from the first TLS record before any TLS
// library sees it (tls-passthrough.ts). RFC 8446 4.1.2 and RFC 6066 3: a handshake record
// (type 22) whose first message is a ClientHello (type 1), its extensions after the session
// id, cipher suites and compression methods; extension 0 holds a host_name (type 0). Anything
// malformed or absent is "no name": the connection then goes on to the TLS listener as usual.

/** A TLS record's header: type, version, length. */
const RECORD_HEADER = 5;
/** The largest TLS plaintext record (2^14) and its header. */
export const MAX_RECORD = RECORD_HEADER + 16_384;
const HANDSHAKE = 22;
const CLIENT_HELLO = 1;
const SERVER_NAME = 0;
const HOST_NAME = 0;

/**
 * How many bytes the first record takes: its header and length once known, MAX_RECORD before;
 * undefined when `head` does not start a handshake record at all.
 */
export function firstRecordSize(head: Buffer): number | undefined {
  if (head.length >= 1 && head[0] !== HANDSHAKE) return undefined;
  if (head.length < RECORD_HEADER) return MAX_RECORD;
  return Math.min(MAX_RECORD, RECORD_HEADER + head.readUInt16BE(3));
}

/** A cursor over a buffer whose reads past the end throw (caught as "no name"). */
class Reader {
  private readonly buffer: Buffer;
  private offset = 0;
  constructor(buffer: Buffer) {
    this.buffer = buffer;
  }
  skip(bytes: number): void {
    if (this.offset + bytes > this.buffer.length) throw new RangeError('truncated');
    this.offset += bytes;
  }
  u8(): number {
    this.skip(1);
    return this.buffer[this.offset - 1];
  }
  u16(): number {
    this.skip(2);
    return this.buffer.readUInt16BE(this.offset - 2);
  }
  /** A sub-reader over the next `bytes` bytes. */
  take(bytes: number): Reader {
    this.skip(bytes);
    return new Reader(this.buffer.subarray(this.offset - bytes, this.offset));
  }
  get remaining(): number {
    return this.buffer.length - this.offset;
  }
  text(bytes: number): string {
    this.skip(bytes);
    return this.buffer.toString('latin1', this.offset - bytes, this.offset);
  }
}

/** The lower-cased host_name of the ClientHello in `record` (a whole first record), if any. */
export function clientHelloServerName(record: Buffer): string | undefined {
  try {
    const body = new Reader(record);
    if (body.u8() !== HANDSHAKE) return undefined;
    body.skip(2); // legacy record version
    const hello = body.take(body.u16());
    if (hello.u8() !== CLIENT_HELLO) return undefined;
    hello.skip(3 + 2 + 32); // handshake length, legacy version, random
    hello.skip(hello.u8()); // legacy session id
    hello.skip(hello.u16()); // cipher suites
    hello.skip(hello.u8()); // compression methods
    const extensions = hello.take(hello.u16());
    while (extensions.remaining > 0) {
      const type = extensions.u16();
      const data = extensions.take(extensions.u16());
      if (type !== SERVER_NAME) continue;
      const names = data.take(data.u16());
      while (names.remaining > 0) {
        const kind = names.u8();
        const name = names.text(names.u16());
        if (kind === HOST_NAME) return name.toLowerCase().replace(/\.$/, '');
      }
    }
    return undefined;
  } catch {
    return undefined;
  }
}
