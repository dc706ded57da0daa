import { constants, createPublicKey, type JsonWebKey, verify } from 'node:crypto';

// JSON Web Tokens (RFC 7519) signed as JWS compact serialisations (RFC 7515), checked with
// Node's crypto against keys of a JWKS: no library, since the whole of it is a split, a
// signature check per algorithm (RFC 7518) and a few claim comparisons.

/** A token's three parts, decoded. */
export interface Jwt {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  /** The signature, base64url as in the token. */
  signature: string;
  /** `header.payload`, what the signature covers. */
  signingInput: string;
}

/** The asymmetric algorithms a JWKS can verify (`none` and HMAC need no key set: refused). */
export const JWS_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

function json(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The token's parts, or undefined when it is not a compact JWS. */
export function decodeJwt(token: string): Jwt | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]*$/.test(p))) return undefined;
  const header = json(parts[0]);
  const payload = json(parts[1]);
  if (header === undefined || payload === undefined) return undefined;
  return { header, payload, signature: parts[2], signingInput: `${parts[0]}.${parts[1]}` };
}

/** Whether `jwk` signed the token with `alg` (the header's, already checked as allowed). */
export function signedBy(jwt: Jwt, jwk: JsonWebKey, alg: string): boolean {
  const bits = alg === 'EdDSA' ? undefined : alg.slice(2);
  try {
    const key = createPublicKey({ key: jwk, format: 'jwk' });
    const data = Buffer.from(jwt.signingInput);
    const signature = Buffer.from(jwt.signature, 'base64url');
    const hash = bits === undefined ? null : `sha${bits}`;
    if (alg.startsWith('PS')) {
      return verify(
        hash,
        data,
        { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(bits) / 8 },
        signature,
      );
    }
    if (alg.startsWith('ES'))
      return verify(hash, data, { key, dsaEncoding: 'ieee-p1363' }, signature);
    return verify(hash, data, key, signature);
  } catch {
    return false;
  }
}

/** What a token's claims must satisfy. */
export interface ClaimRules {
  /** `iss` must equal one of them exactly. */
  issuers: readonly string[];
  /** When not empty, `aud` (a string or a list) must hold one of them. */
  audiences: readonly string[];
  nowMs: number;
  /** Allowed clock difference for exp, nbf and iat. */
  skewMs: number;
}

/** Why the claims fail `rules`, or undefined when they hold. */
export function claimsProblem(
  payload: Record<string, unknown>,
  rules: ClaimRules,
): string | undefined {
  const now = rules.nowMs / 1000;
  const skew = rules.skewMs / 1000;
  const { iss, aud, exp, nbf } = payload;
  if (typeof iss !== 'string' || !rules.issuers.includes(iss)) return 'the issuer is not allowed';
  if (rules.audiences.length > 0) {
    const list = Array.isArray(aud) ? aud : [aud];
    if (!list.some((a) => typeof a === 'string' && rules.audiences.includes(a))) {
      return 'the audience is not allowed';
    }
  }
  if (exp !== undefined && (typeof exp !== 'number' || exp + skew <= now))
    return 'the token expired';
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf - skew > now)) {
    return 'the token is not valid yet';
  }
  return undefined;
}
