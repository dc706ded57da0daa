import type { ByteWriter } from './row-binary.ts';
import { daysFromCivil } from './row-binary.ts';

// Readers of one column value straight from the envelope text (s[a, b)), for the fast path: each
// gives up (NaN or false, writing nothing) on anything but the common shape, and the caller then
// takes the value through the reference mapping. The text has passed NOT_PLAIN (json-scan.ts):
// a string runs from `"` to the next `"`, and a container is canonical.

function digits(s: string, p: number, n: number): number {
  let v = 0;
  for (let k = 0; k < n; k++) {
    const d = s.charCodeAt(p + k) - 48;
    if (d < 0 || d > 9) return Number.NaN;
    v = v * 10 + d;
  }
  return v;
}

/** A JSON integer of at most 15 digits (exact as a double), else NaN. */
export function smallInteger(s: string, a: number, b: number): number {
  const negative = s.charCodeAt(a) === 45;
  const p = negative ? a + 1 : a;
  if (b - p > 15 || b === p) return Number.NaN;
  const v = digits(s, p, b - p);
  return negative ? -v : v;
}

/**
 * Milliseconds since the epoch of `YYYY-MM-DDThh:mm:ssZ` or `…ss.f+Z` at s[p, e) (exactly what
 * row-values.ts's RFC3339 pattern takes; the fraction cut to milliseconds), else NaN.
 */
export function rfc3339Millis(s: string, p: number, e: number): number {
  if (e - p < 20 || s.charCodeAt(e - 1) !== 90) return Number.NaN;
  if (s.charCodeAt(p + 4) !== 45 || s.charCodeAt(p + 7) !== 45 || s.charCodeAt(p + 10) !== 84) {
    return Number.NaN;
  }
  if (s.charCodeAt(p + 13) !== 58 || s.charCodeAt(p + 16) !== 58) return Number.NaN;
  const days = daysFromCivil(digits(s, p, 4), digits(s, p + 5, 2), digits(s, p + 8, 2));
  const time = digits(s, p + 11, 2) * 3600 + digits(s, p + 14, 2) * 60 + digits(s, p + 17, 2);
  let millis = 0;
  const q = p + 19;
  if (q !== e - 1) {
    if (s.charCodeAt(q) !== 46 || q + 2 > e - 1) return Number.NaN;
    const n = e - 1 - (q + 1);
    const kept = Math.min(n, 3);
    if (Number.isNaN(digits(s, q + 1, n))) return Number.NaN;
    millis = digits(s, q + 1, kept) * 10 ** (3 - kept);
  }
  return (days * 86400 + time) * 1000 + millis;
}

// Where the strings of the map being read start and end, and each entry's element count.
const spans: number[] = [];
const counts: number[] = [];

// Reads one `"…"` at p into spans; the position after it, or -1.
function readString(s: string, p: number): number {
  if (s.charCodeAt(p) !== 34) return -1;
  const e = s.indexOf('"', p + 1);
  if (e < 0) return -1;
  spans.push(p + 1, e);
  return e + 1;
}

// Reads `[` strings `]` at p; the position after it, or -1.
function readList(s: string, p: number): number {
  if (s.charCodeAt(p) !== 91) return -1;
  let n = 0;
  if (s.charCodeAt(++p) !== 93) {
    for (;;) {
      p = readString(s, p);
      if (p < 0) return -1;
      n++;
      const c = s.charCodeAt(p);
      if (c === 93) break;
      if (c !== 44) return -1;
      p++;
    }
  }
  counts.push(n);
  return p + 1;
}

/**
 * Writes a Map(String, Array(String)) from the canonical text of an object of string lists at
 * s[a, b) (text order is JSON.parse's order for canonical text); false, writing nothing, for any
 * other value.
 */
export function mapOfLists(w: ByteWriter, s: string, a: number, b: number): boolean {
  spans.length = 0;
  counts.length = 0;
  let p = a + 1;
  if (s.charCodeAt(p) !== 125) {
    for (;;) {
      p = readString(s, p);
      if (p < 0 || s.charCodeAt(p) !== 58) return false;
      p = readList(s, p + 1);
      if (p < 0) return false;
      const c = s.charCodeAt(p);
      if (c === 125) break;
      if (c !== 44) return false;
      p++;
    }
  }
  if (p + 1 !== b) return false;
  w.varint(counts.length);
  let k = 0;
  for (const n of counts) {
    w.string(s.slice(spans[k], spans[k + 1]));
    k += 2;
    w.varint(n);
    for (let j = 0; j < n; j++, k += 2) w.string(s.slice(spans[k], spans[k + 1]));
  }
  return true;
}
