import { timestampToJson } from './timestamp-json.ts';

// A Timestamp message's wire bytes straight to its JSON string (UTF-8, quotes included), the
// text timestampToJson gives for the decoded message: for the one-pass writer (wire-json.ts),
// which had each timestamp decoded to an object, formatted to a string and copied char by char.
// The layout encoders write (seconds then nanos, each at most once, both in RFC 3339's range
// and at most 5-byte varints) is read here; any other is left to the decoder (`slow`), whose
// answer (a string, or null) is written as it is.

const QUOTE = 0x22;
const ZERO = 0x30;
const SECONDS_TAG = 0x08; // field 1, varint
const NANOS_TAG = 0x10; // field 2, varint

let cachedDay = Number.NaN;
const cachedDate = new Uint8Array(11); // "YYYY-MM-DDT"

/**
 * Writes the timestamp of buf[start, end) at `pos` as a JSON string (or `null`) and returns the
 * position after it; `out` needs 40 bytes of room. `slow` is the decoder's answer for any layout.
 */
export function writeTimestamp(
  out: Uint8Array,
  pos: number,
  buf: Uint8Array,
  start: number,
  end: number,
  slow: (buf: Uint8Array, start: number, end: number) => string | null,
): number {
  let p = start;
  let seconds = 0;
  let nanos = 0;
  if (p < end && buf[p] === SECONDS_TAG) {
    seconds = varint35(buf, p + 1, end);
    p = next;
  }
  if (seconds >= 0 && p < end && buf[p] === NANOS_TAG) {
    nanos = varint35(buf, p + 1, end);
    p = next;
  }
  if (seconds < 0 || nanos < 0 || nanos >= 1e9 || p !== end) {
    return writeSlow(out, pos, slow(buf, start, end));
  }
  out[pos++] = QUOTE;
  pos = writeSecond(out, pos, seconds);
  if (nanos !== 0) pos = writeFraction(out, pos, nanos);
  out[pos++] = 0x5a; // Z
  out[pos++] = QUOTE;
  return pos;
}

// Where varint35 stopped.
let next = 0;

/** A varint of at most 5 bytes at buf[p, end) (up to 2^35 - 1), or -1 for any other. */
function varint35(buf: Uint8Array, p: number, end: number): number {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 5 && p < end; i++, scale *= 128) {
    const b = buf[p++];
    value += (b & 0x7f) * scale;
    if (b < 0x80) {
      next = p;
      return value;
    }
  }
  return -1;
}

function writeSlow(out: Uint8Array, pos: number, text: string | null): number {
  if (text === null) {
    out[pos++] = 0x6e; // null
    out[pos++] = 0x75;
    out[pos++] = 0x6c;
    out[pos++] = 0x6c;
    return pos;
  }
  out[pos++] = QUOTE;
  for (let i = 0; i < text.length; i++) out[pos++] = text.charCodeAt(i);
  out[pos++] = QUOTE;
  return pos;
}

// "YYYY-MM-DDTHH:MM:SS" of a Unix second in [0, 2^35): the date part from timestampToJson, once
// per day.
function writeSecond(out: Uint8Array, pos: number, seconds: number): number {
  const days = Math.floor(seconds / 86400);
  if (days !== cachedDay) {
    const date = timestampToJson({ seconds: BigInt(days * 86400), nanos: 0 })!;
    for (let i = 0; i < 11; i++) cachedDate[i] = date.charCodeAt(i);
    cachedDay = days;
  }
  for (let i = 0; i < 11; i++) out[pos++] = cachedDate[i];
  const secOfDay = seconds - days * 86400;
  pos = write2(out, pos, Math.floor(secOfDay / 3600));
  out[pos++] = 0x3a; // :
  pos = write2(out, pos, Math.floor((secOfDay % 3600) / 60));
  out[pos++] = 0x3a;
  return write2(out, pos, secOfDay % 60);
}

function write2(out: Uint8Array, pos: number, n: number): number {
  out[pos++] = ZERO + Math.floor(n / 10);
  out[pos++] = ZERO + (n % 10);
  return pos;
}

// ".fff", ".ffffff" or ".fffffffff": the fewest of the three that keep nanos whole.
function writeFraction(out: Uint8Array, pos: number, nanos: number): number {
  const digits = nanos % 1_000_000 === 0 ? 3 : nanos % 1_000 === 0 ? 6 : 9;
  out[pos++] = 0x2e; // .
  let scale = 100_000_000;
  for (let i = 0; i < digits; i++, scale /= 10)
    out[pos++] = ZERO + (Math.floor(nanos / scale) % 10);
  return pos;
}
