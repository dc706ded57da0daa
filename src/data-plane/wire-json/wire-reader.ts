import { Buffer } from 'node:buffer';
import type { DescField, DescMessage } from '@bufbuild/protobuf';
import { AppError } from '../../shared/errors.ts';
import { type Int64Json, int64FromHalves } from './int64-json.ts';

// The runtime of the generated wire decoders (wire-decode.ts): varint slow paths, strings and
// skipping unknown fields (wire-struct.ts reads header maps and google.protobuf.Struct). Every read is bounded by the end of the message it belongs to, so a length that points
// past its message, a truncated varint or a truncated field throws instead of reading the
// neighbour's bytes.
//
// Where protobuf-es accepts an input, the result is the same as fromBinary's (followed by the
// catalogue's to-json): 32-bit varints keep their low 32 bits (a negative int32 is a 10-byte
// varint), int64 keeps 64 bits and becomes what to-json makes of the bigint, bool is any
// non-zero 64-bit varint, strings are decoded as UTF-8 with protobuf-es's strict validation
// (proto3: invalid UTF-8 throws), a leading U+FEFF is text, not a byte-order mark, and the
// recursion limit is protobuf-es's 100 nested messages. Where protobuf-es is lax this is
// stricter and throws: a known field with the wrong wire type (protobuf-es reads the bytes as
// the declared type anyway), a field running past the end of its message, a varint longer than
// 10 bytes in an unknown field.

/** Nested messages a decoder enters before it gives up (protobuf-es's default recursionLimit). */
export const RECURSION_LIMIT = 100;

export const WIRE_VARINT = 0;
export const WIRE_64BIT = 1;
export const WIRE_LEN = 2;
export const WIRE_START_GROUP = 3;
export const WIRE_END_GROUP = 4;
export const WIRE_32BIT = 5;

/**
 * Where a slow-path read leaves what it cannot return with its value: the position after the
 * value, and a 64-bit varint's halves. Each decoder has its own (see wire-decode.ts), passed to
 * every read; read `pos` right after the call.
 */
export type Cursor = { pos: number; lo: number; hi: number };

/** A decoder's cursor. */
export const newCursor = (): Cursor => ({ pos: 0, lo: 0, hi: 0 });

/** The tag of a field: field number and wire type in one varint value. */
export function tagOf(fieldNo: number, wireType: number): number {
  return ((fieldNo << 3) | wireType) >>> 0;
}

/** The one field of `desc` named `name` (proto name), or a startup error. */
export function fieldNamed(desc: DescMessage, name: string): DescField {
  const field = desc.fields.find((f) => f.name === name);
  if (field === undefined) throw new Error(`wire decode: ${desc.typeName} has no field ${name}`);
  return field;
}

/** What a decoder knows of a message, for its errors: its name and its fields by number. */
export interface MessageInfo {
  typeName: string;
  fields: Record<number, { name: string; wireType: number }>;
}

/** The info of a message whose decoder reads the fields `wireTypes` maps to their wire type. */
export function messageInfo(desc: DescMessage, wireTypes: Map<number, number>): MessageInfo {
  const fields: MessageInfo['fields'] = {};
  for (const field of desc.fields) {
    const wireType = wireTypes.get(field.number);
    if (wireType !== undefined) fields[field.number] = { name: field.name, wireType };
  }
  return { typeName: desc.typeName, fields };
}

// Bytes that are not a valid encoding of the message being decoded: the client's bad events.
function fail(message: string): never {
  throw new AppError('ERR_INVALID_EVENTS', message);
}

export function truncated(pos: number): never {
  return fail(`truncated value at byte ${pos}`);
}

/** A length-delimited field whose length runs past the end of its message. */
export function overrun(length: number, pos: number, end: number): never {
  return fail(`length ${length} at byte ${pos} runs past the end of its message (byte ${end})`);
}

/** Stops a decode at the event past `max`: the request was not decoded past the limit. */
export function tooManyEvents(max: number): never {
  throw new AppError('ERR_BODY_TOO_LARGE', `more than ${max} events`);
}

export function tooDeep(typeName: string): never {
  return fail(`${typeName} nested deeper than ${RECURSION_LIMIT} messages`);
}

/**
 * A 32-bit varint starting at `pos` (its first byte included). Like protobuf-es's reader: up to
 * 10 bytes, the bits above 32 are dropped; returned unsigned, `| 0` makes it an int32.
 */
export function varint32(c: Cursor, buf: Uint8Array, pos: number, end: number): number {
  let result = 0;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) truncated(pos);
    const b = buf[pos++];
    if (i < 4) result |= (b & 0x7f) << (7 * i);
    else if (i === 4) result |= (b & 0x0f) << 28;
    if (b < 0x80) {
      c.pos = pos;
      return result >>> 0;
    }
  }
  return fail(`varint longer than 10 bytes before byte ${pos}`);
}

/** An int32 field's value: a varint's low 32 bits, signed. */
export function int32(c: Cursor, buf: Uint8Array, pos: number, end: number): number {
  return varint32(c, buf, pos, end) | 0;
}

/** A tag: a varint of at most 5 bytes fitting in 32 bits (checked like protobuf-es). */
export function tag(c: Cursor, buf: Uint8Array, pos: number, end: number): number {
  const start = pos;
  const value = varint32(c, buf, pos, end);
  const length = c.pos - start;
  if (length > 5 || (length === 5 && buf[c.pos - 1] > 0x0f)) {
    fail(`tag at byte ${start} overflows 32 bits`);
  }
  return value;
}

// A 64-bit varint into c.lo/c.hi, exactly as protobuf-es's varint64read splits it: 28 bits into
// lo, then a byte shared by lo (4 bits) and hi (3 bits), then hi; at most 10 bytes.
function varint64(c: Cursor, buf: Uint8Array, pos: number, end: number): void {
  let lo = 0;
  let hi = 0;
  let b = 0x80;
  for (let shift = 0; shift < 28 && b >= 0x80; shift += 7) {
    if (pos >= end) truncated(pos);
    b = buf[pos++];
    lo |= (b & 0x7f) << shift;
  }
  if (b >= 0x80) {
    if (pos >= end) truncated(pos);
    b = buf[pos++];
    lo |= (b & 0x0f) << 28;
    hi = (b & 0x70) >> 4;
    for (let shift = 3; shift <= 31 && b >= 0x80; shift += 7) {
      if (pos >= end) truncated(pos);
      b = buf[pos++];
      hi |= (b & 0x7f) << shift;
    }
    if (b >= 0x80) fail(`varint longer than 10 bytes before byte ${pos}`);
  }
  c.lo = lo;
  c.hi = hi;
  c.pos = pos;
}

/**
 * An int64 field's value as the catalogue's JSON has it (int64-json.ts): a JS number up to 2⁵³
 * in magnitude, beyond that the raw JSON of its exact digits.
 */
export function int64(c: Cursor, buf: Uint8Array, pos: number, end: number): Int64Json {
  varint64(c, buf, pos, end);
  // Small values stay small integers (Smis): JSON.stringify writes those faster than doubles.
  if (c.hi === 0 && c.lo >= 0) return c.lo;
  return int64FromHalves(c.hi, c.lo);
}

/** A bool field's value: any non-zero varint (read as 64 bits, like protobuf-es). */
export function bool(c: Cursor, buf: Uint8Array, pos: number, end: number): boolean {
  varint64(c, buf, pos, end);
  return c.lo !== 0 || c.hi !== 0;
}

const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A little-endian double at `pos` (the caller checked the 8 bytes are there). */
export function double(buf: Uint8Array, pos: number): number {
  for (let i = 0; i < 8; i++) f64Bytes[littleEndian ? i : 7 - i] = buf[pos + i];
  return f64[0];
}

// Strings. Most of an event's bytes are short ASCII strings that repeat from event to event
// (header names, hosts, decisions, cipher suites), and creating a JS string costs far more than
// hashing a few bytes, so ASCII strings go through a small direct-mapped cache of the strings
// last made: a hit is verified byte by byte against the cached string, so a collision only costs
// a miss. Non-ASCII goes to a strict (fatal) TextDecoder, like protobuf-es for proto3 strings.

type LatinSlice = (this: Uint8Array, start: number, end: number) => string;
// Node's native one-byte string maker (Buffer#latin1Slice, also for plain Uint8Arrays); only
// called for ASCII bytes, so the fallback may read them as char codes.
const latin1Slice: LatinSlice =
  (Buffer.prototype as unknown as { latin1Slice?: LatinSlice }).latin1Slice ??
  function (this: Uint8Array, start: number, end: number) {
    return String.fromCharCode.apply(null, Array.from(this.subarray(start, end)));
  };
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const CACHE_SIZE = 4096; // a power of two
const CACHE_MAX_LENGTH = 64;
const cacheKeys: string[] = new Array(CACHE_SIZE).fill('');

/** A string field whose bytes [start, end) are not UTF-8. */
export function invalidUtf8(start: number, end: number): never {
  return fail(`invalid UTF-8 in the string at bytes ${start}-${end}`);
}

function decodeUtf8(buf: Uint8Array, start: number, end: number): string {
  try {
    return utf8.decode(buf.subarray(start, end));
  } catch {
    return invalidUtf8(start, end);
  }
}

/** The string of the bytes [start, end) (the caller checked they are within the message). */
export function string(buf: Uint8Array, start: number, end: number): string {
  const length = end - start;
  if (length > CACHE_MAX_LENGTH) return uncached(buf, start, end);
  // The hash reads at most the first and the last 8 bytes; the comparison reads them all (a
  // cached string is ASCII, so non-ASCII bytes never match it).
  let h = length;
  const head = length > 16 ? start + 8 : end;
  for (let i = start; i < head; i++) h = Math.imul(h ^ buf[i], 0x01000193);
  for (let i = length > 16 ? end - 8 : end; i < end; i++) h = Math.imul(h ^ buf[i], 0x01000193);
  const slot = (h ^ (h >>> 13)) & (CACHE_SIZE - 1);
  const cached = cacheKeys[slot];
  if (cached.length === length) {
    let i = 0;
    while (i < length && cached.charCodeAt(i) === buf[start + i]) i++;
    if (i === length) return cached;
  }
  const made = uncached(buf, start, end);
  if (made.length === length) cacheKeys[slot] = made; // ASCII: one char per byte
  return made;
}

function uncached(buf: Uint8Array, start: number, end: number): string {
  for (let i = start; i < end; i++) if (buf[i] > 0x7f) return decodeUtf8(buf, start, end);
  return latin1Slice.call(buf, start, end);
}

/**
 * Skips the value of a field the decoder does not read, returning the position after it; `tag`
 * was read just before `pos`. A field the message declares but with another wire type is an
 * error, as are field number 0, wire types 6 and 7 and an end-group tag without its start.
 */
export function skip(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  tagValue: number,
  depth: number,
  info: MessageInfo,
): number {
  const fieldNo = tagValue >>> 3;
  const wireType = tagValue & 7;
  checkTag(fieldNo, wireType, pos);
  const known = info.fields[fieldNo];
  if (known !== undefined) {
    fail(
      `field ${info.typeName}.${known.name} (${fieldNo}) has wire type ${wireType}, expected ${known.wireType}, before byte ${pos}`,
    );
  }
  return skipValue(c, buf, pos, end, fieldNo, wireType, RECURSION_LIMIT - depth);
}

function checkTag(fieldNo: number, wireType: number, pos: number): void {
  if (fieldNo === 0) fail(`field number 0 in the tag before byte ${pos}`);
  if (wireType > 5) fail(`wire type ${wireType} (field ${fieldNo}) before byte ${pos}`);
}

function skipValue(
  c: Cursor,
  buf: Uint8Array,
  pos: number,
  end: number,
  fieldNo: number,
  wireType: number,
  budget: number,
): number {
  switch (wireType) {
    case WIRE_VARINT:
      for (let i = 0; i < 10; i++) {
        if (pos >= end) truncated(pos);
        if (buf[pos++] < 0x80) return pos;
      }
      return fail(`varint longer than 10 bytes before byte ${pos}`);
    case WIRE_64BIT:
      if (end - pos < 8) truncated(pos);
      return pos + 8;
    case WIRE_32BIT:
      if (end - pos < 4) truncated(pos);
      return pos + 4;
    case WIRE_LEN: {
      const length = varint32(c, buf, pos, end);
      pos = c.pos;
      if (length > end - pos) overrun(length, pos, end);
      return pos + length;
    }
    case WIRE_START_GROUP: {
      if (budget <= 0) fail(`groups nested deeper than ${RECURSION_LIMIT} at byte ${pos}`);
      for (;;) {
        if (pos >= end) fail(`group ${fieldNo} not closed before byte ${end}`);
        const t = tag(c, buf, pos, end);
        pos = c.pos;
        const innerNo = t >>> 3;
        const innerType = t & 7;
        checkTag(innerNo, innerType, pos);
        if (innerType === WIRE_END_GROUP) {
          if (innerNo !== fieldNo) {
            fail(`group ${fieldNo} closed by an end-group tag of field ${innerNo} at byte ${pos}`);
          }
          return pos;
        }
        pos = skipValue(c, buf, pos, end, innerNo, innerType, budget - 1);
      }
    }
    default:
      return fail(`end-group tag of field ${fieldNo} without a start before byte ${pos}`);
  }
}

/** Sets an own property, also for the key `__proto__` (like protobuf-es's setOwn). */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    target[key] = value;
  }
}
