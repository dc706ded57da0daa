import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
let lastMs = 0;
let lastRandom = Buffer.alloc(10);

/** Base32 (Crockford, lower case) of a big-endian byte string, 5 bits a character. */
function base32(bytes: Buffer, chars: number): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += CROCKFORD[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += CROCKFORD[(value << (5 - bits)) & 31];
  return out.slice(0, chars);
}

/**
 * A new id: type prefix + 26 characters that sort by creation time (48-bit ms clock, 80 random
 * bits, monotonic within a millisecond). Sortable ids make `before_id` a stable cursor even when
 * the object it names has been deleted.
 */
export function newId(prefix: string): string {
  const now = Date.now();
  if (now <= lastMs) {
    incrementInPlace(lastRandom);
  } else {
    lastMs = now;
    lastRandom = randomBytes(10);
  }
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(lastMs, 0, 6);
  lastRandom.copy(bytes, 6);
  return `${prefix}_${base32(bytes, 26)}`;
}

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
