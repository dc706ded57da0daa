import { createRequire } from 'node:module';

// kafkajs 2.2.4 (its last release) spends most of a send's CPU encoding records, not on the
// wire (bench:kafka's profile): each record and each of its headers gets its own encoder with a
// fresh zero-filled 512-byte buffer, every varint becomes a Buffer.from([...]) copied in, and the
// record batch's CRC-32C is computed a byte at a time. patchRecordEncoding() swaps in, once per
// process, two replacements that write the same bytes:
// - the record encoder: sizes the record first and writes it into one buffer (small ones come
//   from Node's shared pool), varints written in place;
// - CRC-32C sliced by 8 (eight 256-entry tables, eight bytes per step).
// Both are swapped in kafkajs's module cache before its produce code first loads them (it loads
// them on the first send); records they do not cover (a header with several values, a key or
// value that is neither string, Buffer nor null, a timestamp that is not a safe integer) go to
// kafkajs's own encoder.

const require = createRequire(import.meta.url);

interface Encoder {
  buf: Buffer;
  offset: number;
}

type Bytes = string | Buffer | null | undefined;

interface RecordFields {
  offsetDelta?: number;
  timestampDelta?: number;
  key?: unknown;
  value?: unknown;
  headers?: Record<string, unknown>;
}

type EncodeRecord = (fields: RecordFields) => Encoder;

const CASTAGNOLI = 0x82f63b78;

/** The eight slicing tables: TABLES[k][b] is the CRC of byte b followed by k zero bytes. */
const TABLES = (() => {
  const t = Array.from({ length: 8 }, () => new Int32Array(256));
  for (let b = 0; b < 256; b++) {
    let c = b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ CASTAGNOLI : c >>> 1;
    t[0][b] = c;
  }
  for (let b = 0; b < 256; b++) {
    for (let k = 1; k < 8; k++) t[k][b] = (t[k - 1][b] >>> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
})();

/** CRC-32C (Castagnoli) of `buffer`, unsigned, as Kafka's record batches carry it. */
export function crc32c(buffer: Uint8Array): number {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = TABLES;
  let crc = -1;
  let i = 0;
  const end8 = buffer.length - (buffer.length % 8);
  for (; i < end8; i += 8) {
    const lo =
      crc ^ (buffer[i] | (buffer[i + 1] << 8) | (buffer[i + 2] << 16) | (buffer[i + 3] << 24));
    crc =
      t7[lo & 0xff] ^
      t6[(lo >>> 8) & 0xff] ^
      t5[(lo >>> 16) & 0xff] ^
      t4[lo >>> 24] ^
      t3[buffer[i + 4]] ^
      t2[buffer[i + 5]] ^
      t1[buffer[i + 6]] ^
      t0[buffer[i + 7]];
  }
  for (; i < buffer.length; i++) crc = t0[(crc ^ buffer[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

/** Zigzag of a safe integer (a JS number, so values past 2^31 work too). */
const zigzag = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);

function uvarintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeUVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

const byteLength = (v: string | Buffer) =>
  typeof v === 'string' ? Buffer.byteLength(v, 'utf8') : v.length;

/** Size of a varint-length-prefixed value (length -1 for null). */
const bytesSize = (v: Bytes, length: number) =>
  v == null ? 1 : uvarintSize(zigzag(length)) + length;

function writeBytes(buf: Buffer, at: number, v: Bytes, length: number): number {
  if (v == null) return writeUVarint(buf, at, 1); // zigzag(-1)
  at = writeUVarint(buf, at, zigzag(length));
  if (typeof v === 'string') return at + buf.write(v, at, length, 'utf8');
  return at + v.copy(buf, at);
}

const isBytes = (v: unknown): v is Bytes =>
  v == null || typeof v === 'string' || Buffer.isBuffer(v);

/** kafkajs's Record v0 encoder rewritten to one buffer; undefined where it does not apply. */
function encodeRecordFast(
  fields: RecordFields,
  newEncoder: (buf: Buffer, length: number) => Encoder,
): Encoder | undefined {
  const { offsetDelta = 0, timestampDelta = 0, key, value, headers = {} } = fields;
  if (!Number.isSafeInteger(timestampDelta) || !Number.isSafeInteger(offsetDelta)) return;
  if (!isBytes(key) || !isBytes(value)) return;
  const names = Object.keys(headers);
  const headerValues: (string | Buffer)[] = [];
  for (const name of names) {
    const v = headers[name];
    if (typeof v !== 'string' && !Buffer.isBuffer(v)) return;
    headerValues.push(v);
  }
  const keyLength = key == null ? 0 : byteLength(key);
  const valueLength = value == null ? 0 : byteLength(value);
  let body =
    1 +
    uvarintSize(zigzag(timestampDelta)) +
    uvarintSize(zigzag(offsetDelta)) +
    bytesSize(key, keyLength) +
    bytesSize(value, valueLength) +
    uvarintSize(zigzag(names.length));
  const nameLengths: number[] = [];
  const valueLengths: number[] = [];
  for (let h = 0; h < names.length; h++) {
    nameLengths.push(Buffer.byteLength(names[h], 'utf8'));
    valueLengths.push(byteLength(headerValues[h]));
    body += bytesSize(names[h], nameLengths[h]) + bytesSize(headerValues[h], valueLengths[h]);
  }
  const length = uvarintSize(zigzag(body)) + body;
  const buf = Buffer.allocUnsafe(length);
  let at = writeUVarint(buf, 0, zigzag(body));
  buf[at++] = 0; // attributes: none used
  at = writeUVarint(buf, at, zigzag(timestampDelta));
  at = writeUVarint(buf, at, zigzag(offsetDelta));
  at = writeBytes(buf, at, key, keyLength);
  at = writeBytes(buf, at, value, valueLength);
  at = writeUVarint(buf, at, zigzag(names.length));
  for (let h = 0; h < names.length; h++) {
    at = writeBytes(buf, at, names[h], nameLengths[h]);
    at = writeBytes(buf, at, headerValues[h], valueLengths[h]);
  }
  return newEncoder(buf, at);
}

const MODULES = {
  encoder: 'kafkajs/src/protocol/encoder.js',
  record: 'kafkajs/src/protocol/recordBatch/record/v0/index.js',
  crc32c: 'kafkajs/src/protocol/recordBatch/crc32C/index.js',
  recordBatch: 'kafkajs/src/protocol/recordBatch/v0/index.js',
  produce: 'kafkajs/src/protocol/requests/produce/v3/request.js',
};

/** Replaces the exports of `path` in the module cache (loading it first). */
function replaceExports(resolved: string, make: (original: unknown) => unknown): void {
  const original = require(resolved);
  const cached = require.cache[resolved];
  if (cached) cached.exports = make(original);
}

let patched = false;

/**
 * Swaps in the record encoder and CRC-32C above, once per process. Does nothing when kafkajs's
 * produce code is already loaded (it holds the originals) or kafkajs is not 2.2.4; returns
 * whether the replacements are in place.
 */
export function patchRecordEncoding(): boolean {
  if (patched) return true;
  const paths = resolveAll();
  if (paths === undefined) return false;
  if ([paths.produce, paths.recordBatch, paths.record].some((p) => require.cache[p])) return false;
  const EncoderClass = require(paths.encoder) as { prototype: object };
  const newEncoder = (buf: Buffer, length: number): Encoder => {
    const encoder = Object.create(EncoderClass.prototype) as Encoder;
    encoder.buf = buf;
    encoder.offset = length;
    return encoder;
  };
  replaceExports(paths.record, (original) => {
    const encodeRecord = original as EncodeRecord;
    return (fields: RecordFields) => encodeRecordFast(fields, newEncoder) ?? encodeRecord(fields);
  });
  replaceExports(paths.crc32c, () => crc32c);
  patched = true;
  return true;
}

/**
 * The kafkajs whose internals the replacements were checked against (byte for byte);
 * package.json pins exactly this version, so an install never brings another one.
 */
export const KAFKAJS_VERSION = '2.2.4';

/** MODULES resolved, or undefined for another kafkajs (a version or layout not checked). */
function resolveAll(): Record<keyof typeof MODULES, string> | undefined {
  try {
    if (require('kafkajs/package.json').version !== KAFKAJS_VERSION) return undefined;
    const entries = Object.entries(MODULES).map(([name, path]) => [name, require.resolve(path)]);
    return Object.fromEntries(entries) as Record<keyof typeof MODULES, string>;
  } catch {
    return undefined;
  }
}
