// Validating skippers for the fast path. They only see text without a NOT_PLAIN character (so a
// string is `"` … next `"`); they return the position after the value, or -1 to give up (bad or
// unusual input: the record then takes the slow path).

/** What the fast path cannot take as is: escapes, control characters (incl. \t\n\r), surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
export const NOT_PLAIN = /[\x00-\x1f\\\ud800-\udfff]/;
const MAX_DEPTH = 64;

function skipNumber(s: string, p: number): number {
  let i = p;
  let c = s.charCodeAt(i);
  if (c === 45) c = s.charCodeAt(++i);
  if (c === 48) c = s.charCodeAt(++i);
  else if (c >= 49 && c <= 57) {
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  } else return -1;
  if (c === 46) {
    c = s.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  if (c === 101 || c === 69) {
    c = s.charCodeAt(++i);
    if (c === 43 || c === 45) c = s.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = s.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  return i;
}

/** Skips one JSON value at `p`, checking only that it is well formed. */
export function skipValue(s: string, p: number, depth: number): number {
  switch (s.charCodeAt(p)) {
    case 34: {
      const e = s.indexOf('"', p + 1);
      return e < 0 ? -1 : e + 1;
    }
    case 123:
      return skipObject(s, p, depth);
    case 91:
      return skipArray(s, p, depth);
    case 116:
      return s.startsWith('true', p) ? p + 4 : -1;
    case 102:
      return s.startsWith('false', p) ? p + 5 : -1;
    case 110:
      return s.startsWith('null', p) ? p + 4 : -1;
    default:
      return skipNumber(s, p);
  }
}

function skipObject(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  let c = s.charCodeAt(++p);
  if (c === 125) return p + 1;
  for (;;) {
    if (c !== 34) return -1;
    const e = s.indexOf('"', p + 1);
    if (e < 0 || s.charCodeAt(e + 1) !== 58) return -1;
    p = skipValue(s, e + 2, depth + 1);
    if (p < 0) return -1;
    c = s.charCodeAt(p);
    if (c === 44) {
      c = s.charCodeAt(++p);
      continue;
    }
    return c === 125 ? p + 1 : -1;
  }
}

function skipArray(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  if (s.charCodeAt(++p) === 93) return p + 1;
  for (;;) {
    p = skipValue(s, p, depth + 1);
    if (p < 0) return -1;
    const c = s.charCodeAt(p);
    if (c === 44) {
      p++;
      continue;
    }
    return c === 93 ? p + 1 : -1;
  }
}

// Where the keys of the canonical objects being scanned start (just past the quote) and how long
// they are: a stack, each object checking its own keys for a repeat.
const keyStart: number[] = [];
const keyLength: number[] = [];

function sameText(s: string, a: number, b: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (s.charCodeAt(a + i) !== s.charCodeAt(b + i)) return false;
  return true;
}

/**
 * As skipValue, and gives up unless the value's text is exactly JSON.stringify(JSON.parse(text)):
 * numbers in shortest form, no integer-like key (JSON.parse would move it first), no repeated key
 * (the last would win, in the first one's place). Text that passed NOT_PLAIN has no other way to
 * differ: no whitespace (skipping gives up on it) and no escapes.
 */
function canonValue(s: string, p: number, depth: number): number {
  const c = s.charCodeAt(p);
  if (c === 123) return canonObject(s, p, depth);
  if (c === 91) return canonArray(s, p, depth);
  const e = skipValue(s, p, depth);
  if (e < 0 || c === 34 || c === 116 || c === 102 || c === 110) return e;
  const text = s.slice(p, e);
  return String(Number(text)) === text ? e : -1;
}

function canonObject(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  let c = s.charCodeAt(++p);
  if (c === 125) return p + 1;
  const base = keyStart.length;
  for (;;) {
    if (c !== 34) return -1;
    const a = p + 1;
    const e = s.indexOf('"', a);
    if (e < 0 || s.charCodeAt(e + 1) !== 58) return -1;
    const first = s.charCodeAt(a);
    if (first >= 48 && first <= 57) return -1;
    const n = e - a;
    for (let j = base; j < keyStart.length; j++) {
      if (keyLength[j] === n && sameText(s, keyStart[j], a, n)) return -1;
    }
    keyStart.push(a);
    keyLength.push(n);
    p = canonValue(s, e + 2, depth + 1);
    if (p < 0) return -1;
    c = s.charCodeAt(p);
    if (c === 44) {
      c = s.charCodeAt(++p);
      continue;
    }
    keyStart.length = base;
    keyLength.length = base;
    return c === 125 ? p + 1 : -1;
  }
}

function canonArray(s: string, p: number, depth: number): number {
  if (depth >= MAX_DEPTH) return -1;
  if (s.charCodeAt(++p) === 93) return p + 1;
  for (;;) {
    p = canonValue(s, p, depth + 1);
    if (p < 0) return -1;
    const c = s.charCodeAt(p);
    if (c === 44) {
      p++;
      continue;
    }
    return c === 93 ? p + 1 : -1;
  }
}

/** Skips a column's value: a container is written out whole, so its text must be canonical. */
export function skipLeaf(s: string, p: number): number {
  const c = s.charCodeAt(p);
  if (c === 123 || c === 91) {
    keyStart.length = 0;
    keyLength.length = 0;
    return canonValue(s, p, 1);
  }
  return skipValue(s, p, 1);
}
