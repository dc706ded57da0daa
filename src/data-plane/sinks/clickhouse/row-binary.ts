import { isRawJson } from '../../wire-json/int64-json.ts';

// ClickHouse's RowBinary format: each row's columns in order, little-endian, no separators.
// String: LEB128 byte length, then UTF-8; IntN/UIntN: N/8 bytes; DateTime: UInt32 seconds;
// DateTime64(P): Int64 ticks of 10^-P s; Array(T): LEB128 count, then the elements; Map(K, V):
// LEB128 count, then key and value pairs; Nullable(T): one byte (1 = NULL), then T unless NULL;
// LowCardinality(T): as T. A value is written as ClickHouse reads the same value from a
// JSONEachRow row (integers wrap modulo 2^N, as its text parser does); an absent one (undefined
// or null) as the type's default, as for a field left out of a JSONEachRow row.

/** A growing byte buffer that rows are written into. */
export class ByteWriter {
  buf: Buffer;
  pos = 0;

  constructor(size = 1 << 16) {
    // Not from Node's shared pool: the bytes may be transferred to another thread.
    this.buf = Buffer.allocUnsafeSlow(Math.max(64, size));
  }

  /** Makes room for `n` more bytes. */
  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(v: number): void {
    this.reserve(1);
    this.buf[this.pos++] = v;
  }

  /** A LEB128 unsigned integer (lengths and counts). */
  varint(v: number): void {
    this.reserve(10);
    const { buf } = this;
    while (v >= 0x80) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[this.pos++] = v;
  }

  /** The low 32 bits of an integral number (Int32 and UInt32 alike). */
  u32(v: number): void {
    this.reserve(4);
    const { buf } = this;
    const p = this.pos;
    buf[p] = v;
    buf[p + 1] = v >>> 8;
    buf[p + 2] = v >>> 16;
    buf[p + 3] = v >>> 24;
    this.pos = p + 4;
  }

  /** A safe integer as 64 bits, two's complement. */
  i64(v: number): void {
    this.u32(v >>> 0);
    // Exact: dividing by a power of two, and |v| < 2^53 leaves the quotient below 2^21.
    this.u32(Math.floor(v / 4294967296) | 0);
  }

  /** Any integer as 64 bits, modulo 2^64. */
  big64(v: bigint): void {
    this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt.asUintN(64, v), this.pos);
    this.pos += 8;
  }

  f64(v: number): void {
    this.reserve(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  f32(v: number): void {
    this.reserve(4);
    this.buf.writeFloatLE(v, this.pos);
    this.pos += 4;
  }

  /** A String: byte length, then UTF-8. */
  string(s: string): void {
    if (s.length < 43) {
      // At most 3 bytes per UTF-16 unit: the length fits the one byte kept for it.
      this.reserve(1 + 3 * s.length);
      const n = this.buf.write(s, this.pos + 1, 'utf8');
      this.buf[this.pos] = n;
      this.pos += 1 + n;
      return;
    }
    const n = Buffer.byteLength(s, 'utf8');
    this.varint(n);
    this.reserve(n);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /** A String whose UTF-8 bytes are src[a, b). */
  bytes(src: Uint8Array, a: number, b: number): void {
    const n = b - a;
    this.varint(n);
    this.reserve(n);
    const { buf } = this;
    let p = this.pos;
    if (n < 32) for (let i = a; i < b; i++) buf[p++] = src[i];
    else {
      buf.set(src.subarray(a, b), p);
      p += n;
    }
    this.pos = p;
  }

  /** What was written; shares the buffer. */
  result(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

/** Writes one value of a ClickHouse type; undefined or null writes the type's default. */
export type ValueWriter = (w: ByteWriter, value: unknown) => void;

/** Days from 1970-01-01 to a proleptic Gregorian date (month 1-12). */
export function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m > 2 ? m - 3 : m + 9) + 2) / 5) + d - 1;
  return era * 146097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719468;
}

const DATE_TIME_TEXT = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?/;

/**
 * Ticks of 10^-precision s since the epoch of "YYYY-MM-DD hh:mm:ss[.fff]" read as UTC (the
 * columns' time zone), the fraction cut to `precision` digits; a number is seconds, as
 * ClickHouse reads one; undefined for anything else.
 */
export function dateTimeTicks(value: unknown, precision: number): number | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) ? Math.trunc(value * 10 ** precision) : undefined;
  }
  if (typeof value !== 'string') return undefined;
  const m = DATE_TIME_TEXT.exec(value);
  if (m === null) return undefined;
  const days = daysFromCivil(Number(m[1]), Number(m[2]), Number(m[3]));
  const seconds = days * 86400 + Number(m[4]) * 3600 + Number(m[5]) * 60 + Number(m[6]);
  if (precision === 0) return seconds;
  const fraction = Number((m[7] ?? '').padEnd(precision, '0').slice(0, precision));
  return seconds * 10 ** precision + fraction;
}

/** DateTime is UInt32 seconds: a time outside 1970..2106 is held to its ends. */
export function clampDateTime(seconds: number): number {
  return Math.max(0, Math.min(seconds, 0xffffffff));
}

function integerOf(value: unknown): number | bigint {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) return value;
    return Number.isFinite(value) ? BigInt(Math.trunc(value)) : 0;
  }
  const text = isRawJson(value) ? value.rawJSON : value;
  if (typeof text === 'string' && /^-?\d+$/.test(text)) {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n : BigInt(text);
  }
  if (typeof value === 'boolean') return value ? 1 : 0;
  return 0;
}

function intWriter(bits: number): ValueWriter {
  const bytes = bits / 8;
  if (bits === 64) {
    return (w, v) => {
      const n = integerOf(v);
      if (typeof n === 'number') w.i64(n);
      else w.big64(n);
    };
  }
  return (w, v) => {
    const n = integerOf(v);
    // Modulo 2^32 first (exact for a bigint, and ToUint32 is exact for a safe integer).
    const low = typeof n === 'number' ? n >>> 0 : Number(BigInt.asUintN(32, n));
    w.reserve(bytes);
    for (let i = 0; i < bytes; i++) w.buf[w.pos++] = low >>> (8 * i);
  };
}

function stringWriter(w: ByteWriter, v: unknown): void {
  if (v === undefined || v === null) w.u8(0);
  else w.string(typeof v === 'string' ? v : isRawJson(v) ? v.rawJSON : String(v));
}

/** Splits `A, B(C, D), E` at its top-level commas. */
function typeArgs(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(text.slice(start).trim());
  return out;
}

/** The writer of a ClickHouse type as `system.columns` names it; throws for a type it cannot write. */
export function valueWriter(type: string): ValueWriter {
  const m = /^(\w+)(?:\((.*)\))?$/s.exec(type.trim());
  if (m === null) throw new Error(`RowBinary: cannot read type ${type}`);
  const [, name, argText] = m;
  const args = argText === undefined ? [] : typeArgs(argText);
  switch (name) {
    case 'String':
      return stringWriter;
    case 'LowCardinality':
      return valueWriter(args[0]);
    case 'Nullable': {
      const inner = valueWriter(args[0]);
      return (w, v) => {
        if (v === undefined || v === null) w.u8(1);
        else {
          w.u8(0);
          inner(w, v);
        }
      };
    }
    case 'Array': {
      const element = valueWriter(args[0]);
      return (w, v) => {
        const list = Array.isArray(v) ? v : [];
        w.varint(list.length);
        for (const item of list) element(w, item);
      };
    }
    case 'Map': {
      const key = valueWriter(args[0]);
      const value = valueWriter(args[1]);
      return (w, v) => {
        const entries = v !== null && typeof v === 'object' ? Object.entries(v) : [];
        w.varint(entries.length);
        for (const [k, item] of entries) {
          key(w, k);
          value(w, item);
        }
      };
    }
    case 'Int8':
    case 'UInt8':
    case 'Int16':
    case 'UInt16':
    case 'Int32':
    case 'UInt32':
    case 'Int64':
    case 'UInt64':
      return intWriter(Number(name.replace(/\D/g, '')));
    case 'Bool':
      return (w, v) => w.u8(v === true || v === 1 || v === 'true' ? 1 : 0);
    case 'Float64':
      return (w, v) => w.f64(v === undefined || v === null ? 0 : Number(v));
    case 'Float32':
      return (w, v) => w.f32(v === undefined || v === null ? 0 : Number(v));
    case 'DateTime':
      return (w, v) => w.u32(clampDateTime(dateTimeTicks(v, 0) ?? 0));
    case 'DateTime64': {
      const precision = Number(args[0]);
      return (w, v) => w.i64(dateTimeTicks(v, precision) ?? 0);
    }
  }
  throw new Error(`RowBinary: no writer for type ${type}`);
}
