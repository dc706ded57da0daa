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

/**
 * A new id: type prefix + 26 characters that sort by creation time (48-bit ms clock, 80 random
 * bits, monotonic within a millisecond): the 128 bits in base32, 5 bits a character, the last
 * one padded. Event ids are made per event on the hot path: the clock's characters are kept
 * for the millisecond and nothing is allocated but the string.
 */
export function newId(prefix: string): string {
  const now = Date.now();
  if (now <= lastMs) {
    incrementInPlace(lastRandom);
  } else {
    lastMs = now;
    timeChars = clockChars(now);
    timeLowBits = now % 8;
    randomFillSync(lastRandom);
  }
  // The clock's last 3 bits and the 80 random bits: 17 characters, the last one padded.
  let value = timeLowBits;
  let bits = 3;
  let n = 0;
  for (let i = 0; i < 10; i++) {
    value = (value << 8) | lastRandom[i];
    bits += 8;
    while (bits >= 5) {
      tail[n++] = CROCKFORD_CODES[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  tail[n] = CROCKFORD_CODES[(value << (5 - bits)) & 31];
  return `${prefix}_${timeChars}${String.fromCharCode(...tail)}`;
}

const tail: number[] = new Array(17).fill(0);

function incrementInPlace(bytes: Buffer): void {
  for (let i = bytes.length - 1; i >= 0; i--) {
    bytes[i] = (bytes[i] + 1) & 0xff;
    if (bytes[i] !== 0) return;
  }
}

const ID_BODY = /^[0-9a-hjkmnp-tv-z]{26}$/;

/** True when `id` has the given prefix and a well-formed body. */
export function isId(id: string, prefix: string): boolean {
  return id.startsWith(`${prefix}_`) && ID_BODY.test(id.slice(prefix.length + 1));
}
