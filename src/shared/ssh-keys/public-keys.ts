import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { AppError } from '../errors.ts';
import { mpint, string, WireReader } from './wire.ts';

// SSH public keys as users paste them: an authorized_keys line (`ssh-ed25519 AAAA… comment`),
// RFC 4716 (`ssh-keygen -e`), or PEM (`-----BEGIN PUBLIC KEY-----` SPKI, `RSA PUBLIC KEY` PKCS#1).
// Each is read into the SSH wire blob and a node:crypto KeyObject; importing the key through
// JWK makes OpenSSL check it (an ECDSA point off its curve is refused), and the fingerprint is
// the one `ssh-keygen -lf` prints, so the agent can find a credential by the key it presents.

/** The key families the service accepts, as ngrok's `key_type` names them. */
export type KeyType = 'rsa' | 'ecdsa' | 'ed25519';

/** A parsed, checked SSH public key. */
export interface SshPublicKey {
  type: KeyType;
  /** The SSH algorithm name, e.g. `ecdsa-sha2-nistp256`. */
  algorithm: string;
  /** The key in SSH wire encoding (what certificates embed and fingerprints hash). */
  blob: Buffer;
  bits: number;
  key: KeyObject;
  /** `SHA256:<base64>`, as `ssh-keygen -lf` prints it. */
  fingerprint: string;
  /** `<algorithm> <base64>`, without comment. */
  authorizedKey: string;
}

/** The smallest RSA modulus accepted (NIST SP 800-131A: smaller is disallowed). */
export const RSA_MIN_BITS = 2048;
/** OpenSSH's own largest. */
const RSA_MAX_BITS = 16384;
/** Pasted keys longer than this are not keys (a 16384-bit RSA key in PEM is ~2.8 kB). */
const MAX_TEXT_BYTES = 16 * 1024;

/** SSH curve name ↔ JWK curve and coordinate size. */
const CURVES: Record<string, { crv: string; bytes: number; bits: number }> = {
  nistp256: { crv: 'P-256', bytes: 32, bits: 256 },
  nistp384: { crv: 'P-384', bytes: 48, bits: 384 },
  nistp521: { crv: 'P-521', bytes: 66, bits: 521 },
};

function invalid(field: string, why: string, cause?: unknown): AppError {
  return new AppError(
    'ERR_INVALID_FIELD',
    `"${field}" is not a valid SSH public key: ${why}`,
    { field },
    { cause },
  );
}

/** Parses and checks a public key in any accepted text form; `field` names it in errors. */
export function parsePublicKey(text: string, field = 'public_key'): SshPublicKey {
  if (Buffer.byteLength(text, 'utf8') > MAX_TEXT_BYTES) throw invalid(field, 'it is too long');
  const trimmed = text.trim();
  if (trimmed.startsWith('-----BEGIN ')) return fromPem(trimmed, field);
  if (trimmed.startsWith('---- BEGIN SSH2 PUBLIC KEY ----'))
    return fromBlob(rfc4716Blob(trimmed, field), field);
  return fromAuthorizedKey(trimmed, field);
}

function fromAuthorizedKey(line: string, field: string): SshPublicKey {
  if (/[\r\n]/.test(line)) throw invalid(field, 'give one key, on one line');
  const [algorithm = '', base64 = ''] = line.split(/[ \t]+/);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) {
    throw invalid(
      field,
      'expected "<type> <base64 key> [comment]" (authorized_keys format) or PEM',
    );
  }
  const key = fromBlob(Buffer.from(base64, 'base64'), field);
  if (key.algorithm !== algorithm) {
    throw invalid(
      field,
      `the line says "${algorithm.slice(0, 40)}" but the key is ${key.algorithm}`,
    );
  }
  return key;
}

/** RFC 4716: header lines (`Name: value`, `\`-continued), then the base64 blob. */
function rfc4716Blob(text: string, field: string): Buffer {
  const lines = text.split(/\r?\n/).map((line) => line.trim());
  const end = lines.indexOf('---- END SSH2 PUBLIC KEY ----');
  if (end < 0) throw invalid(field, 'the RFC 4716 block has no END line');
  const body: string[] = [];
  let continued = false;
  for (const line of lines.slice(1, end)) {
    const header: boolean = continued || /^[^ :]+:/.test(line);
    continued = header && line.endsWith('\\');
    if (!header) body.push(line);
  }
  return Buffer.from(body.join(''), 'base64');
}

function fromPem(pem: string, field: string): SshPublicKey {
  const label = /^-----BEGIN ([A-Z0-9 ]+)-----/.exec(pem)?.[1];
  // createPublicKey would derive the public half of a private key: refuse to touch one.
  if (label !== 'PUBLIC KEY' && label !== 'RSA PUBLIC KEY') {
    throw invalid(
      field,
      `PEM "${label ?? '?'}" is not a public key (expected PUBLIC KEY or RSA PUBLIC KEY)`,
    );
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (error) {
    throw invalid(field, 'the PEM does not decode', error);
  }
  return fromBlob(encodePublicKey(key, field), field);
}

/** Reads and checks a wire blob, importing the key through JWK. */
function fromBlob(blob: Buffer, field: string): SshPublicKey {
  let parsed: { type: KeyType; algorithm: string; bits: number; jwk: JsonWebKey };
  try {
    parsed = readBlob(new WireReader(blob), field);
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw invalid(field, 'the key data is malformed', error);
  }
  if (parsed.type === 'rsa' && (parsed.bits < RSA_MIN_BITS || parsed.bits > RSA_MAX_BITS)) {
    throw invalid(
      field,
      `RSA keys must have ${RSA_MIN_BITS} to ${RSA_MAX_BITS} bits; this one has ${parsed.bits}`,
    );
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: parsed.jwk, format: 'jwk' });
  } catch (error) {
    throw invalid(field, 'the key is not a valid point or number for its type', error);
  }
  return {
    type: parsed.type,
    algorithm: parsed.algorithm,
    blob,
    bits: parsed.bits,
    key,
    fingerprint: fingerprint(blob),
    authorizedKey: `${parsed.algorithm} ${blob.toString('base64')}`,
  };
}

function readBlob(
  reader: WireReader,
  field: string,
): {
  type: KeyType;
  algorithm: string;
  bits: number;
  jwk: JsonWebKey;
} {
  const algorithm = reader.string();
  let result: { type: KeyType; bits: number; jwk: JsonWebKey };
  if (algorithm === 'ssh-rsa') {
    const e = reader.mpint();
    const n = reader.mpint();
    const bits = n.length === 0 ? 0 : (n.length - 1) * 8 + (32 - Math.clz32(n[0]));
    result = {
      type: 'rsa',
      bits,
      jwk: { kty: 'RSA', n: n.toString('base64url'), e: e.toString('base64url') },
    };
  } else if (algorithm === 'ssh-ed25519') {
    const x = reader.bytes();
    if (x.length !== 32) throw new Error('an Ed25519 key has 32 bytes');
    result = {
      type: 'ed25519',
      bits: 256,
      jwk: { kty: 'OKP', crv: 'Ed25519', x: x.toString('base64url') },
    };
  } else if (algorithm.startsWith('ecdsa-sha2-') && Object.hasOwn(CURVES, algorithm.slice(11))) {
    const curveName = algorithm.slice(11);
    const curve = CURVES[curveName];
    if (reader.string() !== curveName)
      throw new Error('the curve name does not match the key type');
    const point = reader.bytes();
    if (point.length !== 1 + 2 * curve.bytes || point[0] !== 4)
      throw new Error('expected an uncompressed point');
    const x = point.subarray(1, 1 + curve.bytes).toString('base64url');
    const y = point.subarray(1 + curve.bytes).toString('base64url');
    result = { type: 'ecdsa', bits: curve.bits, jwk: { kty: 'EC', crv: curve.crv, x, y } };
  } else {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${field}" type "${algorithm.slice(0, 40)}" is not supported: use ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa`,
      { field },
    );
  }
  if (!reader.done()) throw new Error('trailing bytes after the key');
  return { algorithm, ...result };
}

/** The SSH wire blob of a node:crypto public (or private) key. */
export function encodePublicKey(key: KeyObject, field = 'public_key'): Buffer {
  const jwk = key.export({ format: 'jwk' });
  const b = (value: string | undefined) => Buffer.from(value ?? '', 'base64url');
  if (jwk.kty === 'RSA')
    return Buffer.concat([string('ssh-rsa'), mpint(b(jwk.e)), mpint(b(jwk.n))]);
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519')
    return Buffer.concat([string('ssh-ed25519'), string(b(jwk.x))]);
  const curve = Object.entries(CURVES).find(([, c]) => c.crv === jwk.crv)?.[0];
  if (jwk.kty === 'EC' && curve !== undefined) {
    const point = Buffer.concat([Buffer.of(4), b(jwk.x), b(jwk.y)]);
    return Buffer.concat([string(`ecdsa-sha2-${curve}`), string(curve), string(point)]);
  }
  throw invalid(
    field,
    `${jwk.kty} ${jwk.crv ?? ''} keys are not supported: use Ed25519, ECDSA P-256/384/521 or RSA`,
  );
}

/** `SHA256:<unpadded base64>` of a wire blob, as OpenSSH prints fingerprints. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}
