// The SSH wire encoding (RFC 4251 §5) that keys, signatures and certificates are written in:
// big-endian integers, length-prefixed strings and two's-complement mpints.

/** Reads SSH wire values from a buffer in order; throws on truncation. */
export class WireReader {
  private offset = 0;
  private readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }

  /** A uint32. */
  uint32(): number {
    this.need(4);
    const value = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  /** A length-prefixed byte string. */
  bytes(): Buffer {
    const length = this.uint32();
    this.need(length);
    const value = this.buf.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  /** A length-prefixed string read as Latin-1 (algorithm names are ASCII). */
  string(): string {
    return this.bytes().toString('latin1');
  }

  /** A positive mpint as unsigned big-endian bytes, leading zeros removed. */
  mpint(): Buffer {
    const value = this.bytes();
    if (value.length > 0 && value[0] & 0x80) throw new Error('negative mpint');
    let start = 0;
    while (start < value.length && value[start] === 0) start++;
    return value.subarray(start);
  }

  /** True when every byte has been read. */
  done(): boolean {
    return this.offset === this.buf.length;
  }

  private need(length: number): void {
    if (this.offset + length > this.buf.length) throw new Error('truncated SSH wire data');
  }
}

/** A uint32. */
export function uint32(value: number): Buffer {
  const buf = Buffer.alloc(4);
  buf.writeUInt32BE(value);
  return buf;
}

/** A uint64. */
export function uint64(value: bigint): Buffer {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64BE(value);
  return buf;
}

/** A length-prefixed string. */
export function string(value: Buffer | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([uint32(bytes.length), bytes]);
}

/** An mpint from unsigned big-endian bytes: leading zeros dropped, a zero added if the top bit is set. */
export function mpint(unsigned: Buffer): Buffer {
  let start = 0;
  while (start < unsigned.length && unsigned[start] === 0) start++;
  const trimmed = unsigned.subarray(start);
  const padded =
    trimmed.length > 0 && trimmed[0] & 0x80 ? Buffer.concat([Buffer.of(0), trimmed]) : trimmed;
  return string(padded);
}
