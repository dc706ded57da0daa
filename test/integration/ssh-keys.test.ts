import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/shared/errors.ts';
import { parsePublicKey } from '../../src/shared/ssh-keys/public-keys.ts';
import { keygen, keygenFingerprint, sshDir, sshKeygen } from '../helpers/ssh-keygen.ts';

// Keys made by OpenSSH's ssh-keygen and OpenSSL, read by parsePublicKey, must have the type,
// size and SHA256 fingerprint ssh-keygen itself prints: the agent finds credentials by it.

const dir = sshDir();
afterAll(() => dir.remove());

function refusal(text: string): AppError {
  try {
    parsePublicKey(text);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('ERR_INVALID_FIELD');
    expect((error as AppError).details).toEqual({ field: 'public_key' });
    return error as AppError;
  }
  throw new Error(`accepted ${text.slice(0, 40)}`);
}

const KEYS = [
  { name: 'rsa3072', type: 'rsa', bits: 3072, algorithm: 'ssh-rsa', keyType: 'rsa' },
  { name: 'rsa2048', type: 'rsa', bits: 2048, algorithm: 'ssh-rsa', keyType: 'rsa' },
  { name: 'p256', type: 'ecdsa', bits: 256, algorithm: 'ecdsa-sha2-nistp256', keyType: 'ecdsa' },
  { name: 'p384', type: 'ecdsa', bits: 384, algorithm: 'ecdsa-sha2-nistp384', keyType: 'ecdsa' },
  { name: 'p521', type: 'ecdsa', bits: 521, algorithm: 'ecdsa-sha2-nistp521', keyType: 'ecdsa' },
  { name: 'ed25519', type: 'ed25519', bits: 256, algorithm: 'ssh-ed25519', keyType: 'ed25519' },
] as const;

describe('SSH public keys made by ssh-keygen', () => {
  const made = new Map<string, { path: string; pub: string; fingerprint: string }>();
  beforeAll(async () => {
    for (const key of KEYS) {
      const { path, pub } = await keygen(dir.path, key.name, key.type, key.bits);
      const { bits, fingerprint } = await keygenFingerprint(`${path}.pub`);
      expect(bits).toBe(key.bits);
      made.set(key.name, { path, pub, fingerprint });
    }
  });

  it.each(KEYS)(
    'reads $name in authorized_keys format with ssh-keygen -lf’s fingerprint',
    (key) => {
      const { pub, fingerprint } = made.get(key.name)!;
      const parsed = parsePublicKey(pub);
      expect(parsed).toMatchObject({
        type: key.keyType,
        algorithm: key.algorithm,
        bits: key.bits,
        fingerprint,
      });
      expect(parsed.authorizedKey).toBe(pub.split(' ').slice(0, 2).join(' '));
      expect(parsePublicKey(`  ${pub.split(' ').slice(0, 2).join('\t')}  `).fingerprint).toBe(
        fingerprint,
      );
    },
  );

  it.each(KEYS)(
    'reads $name in RFC 4716 and, where ssh-keygen writes them, PEM and PKCS#8',
    async (key) => {
      const { path, fingerprint } = made.get(key.name)!;
      const modes = key.type === 'ed25519' ? ['RFC4716'] : ['RFC4716', 'PEM', 'PKCS8'];
      for (const mode of modes) {
        const text = await sshKeygen('-e', '-m', mode, '-f', `${path}.pub`);
        expect(parsePublicKey(text).fingerprint, mode).toBe(fingerprint);
      }
    },
  );

  it('reads an OpenSSL Ed25519 SPKI PEM into the key ssh-keygen fingerprints the same', async () => {
    const pem = execFileSync('openssl', ['pkey', '-pubout'], {
      input: execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519']),
    }).toString();
    const parsed = parsePublicKey(pem);
    expect(parsed.type).toBe('ed25519');
    const { fingerprint } = await keygenFingerprint(
      dir.file('openssl-ed25519.pub', parsed.authorizedKey),
    );
    expect(parsed.fingerprint).toBe(fingerprint);
  });

  it('refuses RSA under 2048 bits, DSA, and security-key types', async () => {
    const small = await keygen(dir.path, 'rsa1024', 'rsa', 1024);
    expect(refusal(small.pub).message).toContain('2048 to 16384 bits; this one has 1024');
    const sk =
      'sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIE1HpQ2O4K5nHfh0k/cVbOxw0oS2tKHBMdc24PLxHOPrAAAABHNzaDo=';
    expect(refusal(sk).message).toContain('"sk-ssh-ed25519@openssh.com" is not supported');
    const dss = `ssh-dss ${Buffer.concat([Buffer.from([0, 0, 0, 7]), Buffer.from('ssh-dss')]).toString('base64')}`;
    expect(refusal(dss).message).toContain('"ssh-dss" is not supported');
  });

  it('refuses private keys, mislabelled, truncated, trailing and off-curve keys, and junk', () => {
    const { pub } = made.get('p256')!;
    const privatePem = execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519']).toString();
    expect(refusal(privatePem).message).toContain('"PRIVATE KEY" is not a public key');
    const ecPem = execFileSync('openssl', [
      'ecparam',
      '-name',
      'prime256v1',
      '-genkey',
      '-noout',
    ]).toString();
    expect(refusal(ecPem).message).toContain('"EC PRIVATE KEY" is not a public key');
    const [, base64] = pub.split(' ');
    expect(refusal(`ssh-ed25519 ${base64}`).message).toContain(
      'the line says "ssh-ed25519" but the key is ecdsa-sha2-nistp256',
    );
    const blob = Buffer.from(base64, 'base64');
    refusal(`ecdsa-sha2-nistp256 ${blob.subarray(0, blob.length - 1).toString('base64')}`);
    refusal(`ecdsa-sha2-nistp256 ${Buffer.concat([blob, Buffer.of(0)]).toString('base64')}`);
    const offCurve = Buffer.from(blob);
    offCurve[offCurve.length - 1] ^= 1;
    expect(refusal(`ecdsa-sha2-nistp256 ${offCurve.toString('base64')}`).message).toContain(
      'not a valid point',
    );
    refusal('');
    refusal('not a key');
    refusal(`${pub}${pub}`);
    refusal('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----');
  });
});
