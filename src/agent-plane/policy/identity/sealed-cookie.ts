import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// The login actions' cookies (the session, and the state of a login under way) are JSON sealed
// with AES-256-GCM under a key derived from SECRETS_KEY: the browser holds them but can neither
// read them (the provider's tokens are inside) nor change them. The cookie's name is the
// associated data, so a value sealed for one cookie never opens as another.

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Seals and opens one cookie's JSON. */
export interface CookieSealer {
  seal(name: string, value: unknown): string;
  /** The value, or undefined when the text was not sealed by these keys for `name`. */
  open(name: string, text: string): unknown;
}

/** A sealer with `keys` (the first seals; each opens, so a key rotation keeps sessions). */
export function cookieSealer(keys: readonly Buffer[]): CookieSealer {
  if (keys.length === 0 || keys.some((k) => k.length !== 32)) {
    throw new Error('cookie keys are 32 bytes each, at least one');
  }
  return {
    seal(name, value) {
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', keys[0], nonce).setAAD(Buffer.from(name));
      const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
      return Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url');
    },
    open(name, text) {
      const data = Buffer.from(text, 'base64url');
      if (data.length <= NONCE_BYTES + TAG_BYTES) return undefined;
      for (const key of keys) {
        try {
          const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, NONCE_BYTES))
            .setAAD(Buffer.from(name))
            .setAuthTag(data.subarray(data.length - TAG_BYTES));
          const plain = Buffer.concat([
            decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)),
            decipher.final(),
          ]);
          return JSON.parse(plain.toString('utf8'));
        } catch {
          // Not this key (or not ours at all): try the next.
        }
      }
      return undefined;
    },
  };
}

/** The cookies of a request's Cookie fields, by name (the first of a repeated name wins). */
export function requestCookies(fields: readonly string[] | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const field of fields ?? []) {
    for (const pair of field.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0) continue;
      const name = pair.slice(0, eq).trim();
      if (!cookies.has(name)) cookies.set(name, pair.slice(eq + 1).trim());
    }
  }
  return cookies;
}

/** Where and how long a cookie is kept. */
export interface CookieScope {
  secure: boolean;
  domain?: string;
}

/** A Set-Cookie value: HttpOnly, SameSite=Lax, path /; `maxAgeS` 0 deletes it. */
export function setCookie(
  name: string,
  value: string,
  scope: CookieScope,
  maxAgeS?: number,
): string {
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (scope.secure) parts.push('Secure');
  if (scope.domain !== undefined) parts.push(`Domain=${scope.domain}`);
  if (maxAgeS !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(maxAgeS))}`);
  return parts.join('; ');
}
