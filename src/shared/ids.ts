import { Buffer } from 'node:buffer';
import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const CROCKFORD_CODES = Array.from(CROCKFORD, (c) => c.charCodeAt(0));
/** The 48-bit millisecond clock of the last id, its first 45 bits in base32, its last 3 bits. */
let lastMs = 0;
let timeChars = '';
let timeLowBits = 0;
/** The last id's 80 random bits, incremented for each further id in the same millisecond. */
const lastRandom = Buffer.alloc(10);

/** The first 45 of the clock's 48 bits, 9 base32 characters (the same for a millisecond). */
function clockChars(ms: number): string {
  let high = Math.floor(ms / 8);
  let out = '';
  for (let i = 0; i < 9; i++) {
    out = CROCKFORD[high % 32] + out;
    high = Math.floor(high / 32);
  }
  return out;
}

// Random bytes drawn ahead, many milliseconds' worth at a time: one randomFillSync call per
// millisecond cost more than the id it seeds when events are routed by the thousand.
const randomPool = Buffer.alloc(10 * 256);
let poolAt = randomPool.length;

/** 10 fresh random bytes into `into`. */
function freshRandom(into: Buffer): void {
  if (poolAt === randomPool.length) {
    randomFillSync(randomPool);
    poolAt = 0;
  }
  randomPool.copy(into, 0, poolAt, poolAt + 10);
  poolAt += 10;
}

/**
 * The id's 17 characters after the clock's 9 are the clock's last 3 bits and the 80 random bits
 * (the last character padded). The first 13 of them (65 bits: up to random byte 7) change only
 * when an increment carries that far, so they are kept as a string until it does.
 */
let randomHead = '';

function headChars(): string {
  let value = timeLowBits;
  let bits = 3;
  let n = 0;
  for (let i = 0; i < 8; i++) {
    value = (value << 8) | lastRandom[i];
    bits += 8;
    while (bits >= 5 && n < 13) {
      head[n++] = CROCKFORD_CODES[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return String.fromCharCode(...head);
}

const head: number[] = new Array(13).fill(0);

/**
 * A new id: type prefix + 26 characters that sort by creation time (48-bit ms clock, 80 random
 * bits, monotonic within a millisecond): the 128 bits in base32, 5 bits a character, the last
 * one padded. Event ids are made per event on the hot path: the clock's characters are kept
 * for the millisecond, most of the random ones until an increment carries into them.
 */
export function newId(prefix: string): string {
  const now = Date.now();
  if (now <= lastMs) {
    if (incrementInPlace(lastRandom) < 8) randomHead = headChars();
  } else {
    lastMs = now;
    timeChars = clockChars(now);
    timeLowBits = now % 8;
    freshRandom(lastRandom);
    randomHead = headChars();
  }
  // The last 4 characters: the last 2 bits of byte 7, bytes 8 and 9, 2 bits of padding.
  const low = (((lastRandom[7] & 3) << 16) | (lastRandom[8] << 8) | lastRandom[9]) << 2;
  return `${prefix}_${timeChars}${randomHead}${String.fromCharCode(
    CROCKFORD_CODES[(low >>> 15) & 31],
    CROCKFORD_CODES[(low >>> 10) & 31],
    CROCKFORD_CODES[(low >>> 5) & 31],
    CROCKFORD_CODES[low & 31],
  )}`;
}

/** Adds one to the big-endian number in `bytes`; the index of the highest byte that changed. */
function incrementInPlace(bytes: Buffer): number {
  for (let i = bytes.length - 1; i >= 0; i--) {
    bytes[i] = (bytes[i] + 1) & 0xff;
    if (bytes[i] !== 0) return i;
  }
  return 0;
}

const ID_BODY = /^[0-9a-hjkmnp-tv-z]{26}$/;

/** True when `id` has the given prefix and a well-formed body. */
export function isId(id: string, prefix: string): boolean {
  return id.startsWith(`${prefix}_`) && ID_BODY.test(id.slice(prefix.length + 1));
}
