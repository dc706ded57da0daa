import { createPrivateKey, sign as cryptoSign, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { AppError } from '../errors.ts';
import { encodePublicKey, type KeyType } from './public-keys.ts';
import { mpint, string, WireReader } from './wire.ts';

// An SSH certificate authority is a key pair made here with node:crypto: the public half is shown
// in authorized_keys format (for sshd's TrustedUserCAKeys or a known_hosts @cert-authority line),
// the private half is PKCS#8 PEM that the store seals and only `authoritySigner` ever opens.
// Request names and choices follow ngrok's API: `private_key_type`, `key_size` (RSA, 2048 or
// 4096), `elliptic_curve` (ECDSA).

const generate = promisify(generateKeyPair);

/** What to generate, as ngrok's create request names it. */
export interface AuthorityOptions {
  private_key_type?: unknown;
  key_size?: unknown;
  elliptic_curve?: unknown;
}

/** A generated authority: the private key must be sealed before it is stored. */
export interface GeneratedAuthority {
  keyType: KeyType;
  /** `<algorithm> <base64>`. */
  publicKey: string;
  /** PKCS#8 PEM. */
  privateKeyPem: string;
}

/** Signs data as the authority, returning an SSH signature blob (`string format, string sig`). */
export interface AuthoritySigner {
  keyType: KeyType;
  /** The authority's public key in SSH wire encoding (a certificate's signature key). */
  publicBlob: Buffer;
  sign(data: Buffer): Buffer;
}

export const DEFAULT_KEY_TYPE = 'ed25519';
export const DEFAULT_RSA_BITS = 4096;
export const RSA_KEY_SIZES = [2048, 4096] as const;
/** Accepted spellings of each curve (ngrok's docs do not list theirs) → the OpenSSL name. */
const CURVES: Record<string, string> = {
  p256: 'P-256',
  nistp256: 'P-256',
  secp256r1: 'P-256',
  prime256v1: 'P-256',
  p384: 'P-384',
  nistp384: 'P-384',
  secp384r1: 'P-384',
  p521: 'P-521',
  nistp521: 'P-521',
  secp521r1: 'P-521',
};
export const DEFAULT_CURVE = 'p256';
/** ECDSA signs with the hash its curve size calls for (RFC 5656 §6.2.1). */
const ECDSA_HASH: Record<string, string> = {
  'ecdsa-sha2-nistp256': 'sha256',
  'ecdsa-sha2-nistp384': 'sha384',
  'ecdsa-sha2-nistp521': 'sha512',
};

function invalid(field: string, message: string): AppError {
  return new AppError('ERR_INVALID_FIELD', message, { field });
}

/** The key type named by a request, refusing options that do not belong to it. */
function keyTypeOf(options: AuthorityOptions): KeyType {
  const type = options.private_key_type ?? DEFAULT_KEY_TYPE;
  if (type !== 'ed25519' && type !== 'ecdsa' && type !== 'rsa') {
    throw invalid('private_key_type', '"private_key_type" must be "ed25519", "ecdsa" or "rsa"');
  }
  if (type !== 'rsa' && options.key_size !== undefined && options.key_size !== null) {
    throw invalid('key_size', '"key_size" applies only to "private_key_type": "rsa"');
  }
  if (type !== 'ecdsa' && options.elliptic_curve !== undefined && options.elliptic_curve !== null) {
    throw invalid('elliptic_curve', '"elliptic_curve" applies only to "private_key_type": "ecdsa"');
  }
  return type;
}

function curveOf(raw: unknown): string {
  const name = typeof raw === 'string' ? raw.toLowerCase().replace(/[-_]/g, '') : '';
  if (!Object.hasOwn(CURVES, name)) {
    throw invalid('elliptic_curve', '"elliptic_curve" must be "p256", "p384" or "p521"');
  }
  return CURVES[name];
}

function rsaBitsOf(raw: unknown): number {
  if (!RSA_KEY_SIZES.includes(raw as 2048 | 4096)) {
    throw invalid('key_size', '"key_size" must be 2048 or 4096');
  }
  return raw as number;
}

/** Generates an authority's key pair (RSA 4096 takes about a second: it runs off the event loop). */
export async function generateAuthority(options: AuthorityOptions): Promise<GeneratedAuthority> {
  const keyType = keyTypeOf(options);
  const pair =
    keyType === 'ed25519'
      ? await generate('ed25519')
      : keyType === 'ecdsa'
        ? await generate('ec', { namedCurve: curveOf(options.elliptic_curve ?? DEFAULT_CURVE) })
        : await generate('rsa', { modulusLength: rsaBitsOf(options.key_size ?? DEFAULT_RSA_BITS) });
  const blob = encodePublicKey(pair.publicKey);
  const algorithm = new WireReader(blob).string();
  return {
    keyType,
    publicKey: `${algorithm} ${blob.toString('base64')}`,
    privateKeyPem: pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  };
}

/** A signer for an authority's (unsealed) private key. */
export function authoritySigner(privateKeyPem: string): AuthoritySigner {
  const key = createPrivateKey(privateKeyPem);
  const publicBlob = encodePublicKey(key);
  const algorithm = new WireReader(publicBlob).string();
  const keyType: KeyType =
    key.asymmetricKeyType === 'rsa' ? 'rsa' : key.asymmetricKeyType === 'ec' ? 'ecdsa' : 'ed25519';
  return { keyType, publicBlob, sign: (data) => signBlob(key, keyType, algorithm, data) };
}

function signBlob(key: KeyObject, keyType: KeyType, algorithm: string, data: Buffer): Buffer {
  if (keyType === 'ed25519') {
    return Buffer.concat([string('ssh-ed25519'), string(cryptoSign(null, data, key))]);
  }
  if (keyType === 'rsa') {
    // rsa-sha2-512 (RFC 8332): OpenSSH refuses SHA-1 `ssh-rsa` CA signatures since 8.2.
    return Buffer.concat([string('rsa-sha2-512'), string(cryptoSign('sha512', data, key))]);
  }
  const hash = ECDSA_HASH[algorithm];
  const raw = cryptoSign(hash, data, { key, dsaEncoding: 'ieee-p1363' });
  const half = raw.length / 2;
  const rs = Buffer.concat([mpint(raw.subarray(0, half)), mpint(raw.subarray(half))]);
  return Buffer.concat([string(algorithm), string(rs)]);
}
