import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new API key token: 256 random bits, URL-safe, with a prefix that secret scanners can match. */
export function newToken(prefix = 'aik'): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

/** What the store keeps of a token: its SHA-256 (tokens are high-entropy, so no salt is needed). */
export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Constant-time comparison of two token hashes. */
export function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Matches `token` against a fixed set of tokens in constant time per candidate. */
export function createTokenSet(tokens: string[]): (token: string) => boolean {
  const hashes = tokens.map(hashToken);
  return (token) => {
    const candidate = hashToken(token);
    let found = false;
    for (const hash of hashes) found = sameHash(hash, candidate) || found;
    return found;
  };
}

const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/;

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1];
}
