import { type Buffer, isUtf8 } from 'node:buffer';
import { invalidUtf8 } from './wire-reader.ts';

// The runtime of wire-json.ts: JSON values written as UTF-8 bytes, exactly as JSON.stringify
// writes the same values (the tests hold them to it). Every writer takes the output buffer and
// position and returns the position after what it wrote; the caller made the room.

/** Room for any number writeInteger writes (sign and 20 digits) or `false`. */
export const NUMBER_ROOM = 24;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const HEX = '0123456789abcdef';

// JSON.stringify's short escapes; every other byte below 0x20 becomes \u00XX (lowercase).
const SHORT: Record<number, number> = { 8: 0x62, 9: 0x74, 10: 0x6e, 12: 0x66, 13: 0x72 };

function escapeByte(out: Uint8Array, pos: number, b: number): number {
  out[pos++] = BACKSLASH;
  if (b === QUOTE || b === BACKSLASH) {
    out[pos++] = b;
  } else if (SHORT[b] !== undefined) {
    out[pos++] = SHORT[b];
  } else {
    out[pos++] = 0x75; // u
    out[pos++] = 0x30;
    out[pos++] = 0x30;
    out[pos++] = HEX.charCodeAt(b >> 4);
    out[pos++] = HEX.charCodeAt(b & 15);
  }
  return pos;
}

/**
 * The UTF-8 bytes src[start, end) as a JSON string. Bytes that are not valid UTF-8 throw
 * ERR_INVALID_EVENTS, as the decoder does (protobuf-es's strict proto3 strings); valid ones are
 * copied as they are, escaped where JSON.stringify escapes (", \ and control characters).
 */
export function writeString(
  out: Uint8Array,
  pos: number,
  src: Uint8Array,
  start: number,
  end: number,
): number {
  const length = end - start;
  if (length < 4) return writeEscaped(out, pos, src, start, end);
  const found = copyPlain(out, pos + 1, src, start, end);
  if (found === ESCAPES) return writeEscaped(out, pos, src, start, end);
  if (found === NON_ASCII && !isUtf8(src.subarray(start, end))) invalidUtf8(start, end);
  out[pos] = QUOTE;
  out[pos + 1 + length] = QUOTE;
  return pos + length + 2;
}

// What copyPlain found in the bytes it copied: nothing to escape (ASCII or not), or an escape.
const ASCII = 0;
const NON_ASCII = 1;
const ESCAPES = 2;

// DataViews of the last source and output arrays: the writers call with the same two again and
// again (a request's bytes, the text buffer), and a view per call would cost more than the copy.
const EMPTY_VIEW: DataView = new DataView(new ArrayBuffer(0));
let srcArray: Uint8Array | undefined;
let srcView = EMPTY_VIEW;
let outArray: Uint8Array | undefined;
let outView = EMPTY_VIEW;

/**
 * Copies src[start, end) (at least 4 bytes) to out at `at`, four bytes at a time, and says
 * whether any of them JSON escapes or is not ASCII. The escape test is exact (a byte below 0x20,
 * or equal to " or \, per 32-bit word: the has-zero-byte trick), so that only strings which do
 * escape go back to the byte loop. The last word overlaps the one before when the length is not
 * a multiple of 4: no byte outside the string is read or written.
 */
function copyPlain(
  out: Uint8Array,
  at: number,
  src: Uint8Array,
  start: number,
  end: number,
): number {
  if (src !== srcArray) {
    srcArray = src;
    srcView = new DataView(src.buffer, src.byteOffset, src.byteLength);
  }
  if (out !== outArray) {
    outArray = out;
    outView = new DataView(out.buffer, out.byteOffset, out.byteLength);
  }
  const from = srcView;
  const to = outView;
  const shift = at - start;
  const last = end - 4;
  let high = 0;
  let escapes = 0;
  for (let i = start; i < last; i += 4) {
    const word = from.getUint32(i, true);
    to.setUint32(i + shift, word, true);
    high |= word;
    escapes |= escapesIn(word);
  }
  const word = from.getUint32(last, true);
  to.setUint32(last + shift, word, true);
  high |= word;
  escapes |= escapesIn(word);
  if ((escapes & 0x80808080) !== 0) return ESCAPES;
  return (high & 0x80808080) !== 0 ? NON_ASCII : ASCII;
}

// Bit 7 of each byte of the answer is set where that byte of `word` is below 0x20, " or \
// (or above such a byte: the borrow; the test is whether any is set).
function escapesIn(word: number): number {
  const quote = word ^ 0x22222222;
  const backslash = word ^ 0x5c5c5c5c;
  return (
    ((word - 0x20202020) & ~word) |
    ((quote - 0x01010101) & ~quote) |
    ((backslash - 0x01010101) & ~backslash)
  );
}

// The byte loop: every byte checked, escapes written.
function writeEscaped(
  out: Uint8Array,
  pos: number,
  src: Uint8Array,
  start: number,
  end: number,
): number {
  out[pos++] = QUOTE;
  let ascii = true;
  for (let i = start; i < end; i++) {
    const b = src[i];
    if (b >= 0x20 && b !== QUOTE && b !== BACKSLASH) {
      out[pos++] = b;
      if (b > 0x7f) ascii = false;
    } else {
      pos = escapeByte(out, pos, b);
    }
  }
  if (!ascii && !isUtf8(src.subarray(start, end))) invalidUtf8(start, end);
  out[pos++] = QUOTE;
  return pos;
}

/** Throws ERR_INVALID_EVENTS unless src[start, end) is UTF-8 (for bytes read but not written). */
export function checkUtf8(src: Uint8Array, start: number, end: number): void {
  for (let i = start; i < end; i++) {
    if (src[i] > 0x7f) {
      if (!isUtf8(src.subarray(start, end))) invalidUtf8(start, end);
      return;
    }
  }
}

/** A JS string as a JSON string (UTF-8); `out` needs room for 18 bytes per character. */
export function writeJsString(out: Buffer, pos: number, s: string): number {
  const start = pos;
  out[pos++] = QUOTE;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0x7f && c !== QUOTE && c !== BACKSLASH) out[pos++] = c;
    else if (c < 0x20 || c === QUOTE || c === BACKSLASH) pos = escapeByte(out, pos, c);
    else return start + out.write(JSON.stringify(s), start); // non-ASCII: the engine's own
  }
  out[pos++] = QUOTE;
  return pos;
}

/** ASCII text as it is (timestamps, digits, raw JSON of large integers). */
export function writeAscii(out: Uint8Array, pos: number, s: string): number {
  for (let i = 0; i < s.length; i++) out[pos++] = s.charCodeAt(i);
  return pos;
}

/** An integer of at most 2^53 in magnitude, in the digits JSON.stringify writes. */
export function writeInteger(out: Uint8Array, pos: number, n: number): number {
  if (n < 0) {
    out[pos++] = 0x2d;
    n = -n;
  }
  if (n < 10) {
    out[pos++] = 0x30 + n;
    return pos;
  }
  if (n > 0x7fffffff) return writeAscii(out, pos, String(n));
  let digits = 1;
  for (let m = n; m >= 10; m = (m / 10) | 0) digits++;
  let at = pos + digits;
  for (let m = n; at > pos; m = (m / 10) | 0) out[--at] = 0x30 + (m % 10);
  return pos + digits;
}

/** `true` or `false`. */
export function writeBool(out: Uint8Array, pos: number, value: boolean): number {
  return writeAscii(out, pos, value ? 'true' : 'false');
}
