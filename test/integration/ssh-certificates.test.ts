import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/shared/errors.ts';
import { authoritySigner, generateAuthority } from '../../src/shared/ssh-keys/authorities.ts';
import {
  readCriticalOptions,
  readExtensions,
  readPrincipals,
  readValidity,
  signCertificate,
} from '../../src/shared/ssh-keys/certificates.ts';
import { parsePublicKey } from '../../src/shared/ssh-keys/public-keys.ts';
import { keygen, keygenFingerprint, listCertificate, sshDir } from '../helpers/ssh-keygen.ts';

// Authorities generated with node:crypto sign OpenSSH certificates that ssh-keygen -L verifies
// and reads back field by field: kind, key, signing CA and its signature algorithm, key id,
// validity, principals, critical options and extensions.

const dir = sshDir();
afterAll(() => dir.remove());

const AUTHORITIES = [
  { options: { private_key_type: 'ed25519' }, ca: 'ED25519', using: 'ssh-ed25519', bits: 256 },
  { options: { private_key_type: 'ecdsa' }, ca: 'ECDSA', using: 'ecdsa-sha2-nistp256', bits: 256 },
  {
    options: { private_key_type: 'ecdsa', elliptic_curve: 'p384' },
    ca: 'ECDSA',
    using: 'ecdsa-sha2-nistp384',
    bits: 384,
  },
  {
    options: { private_key_type: 'ecdsa', elliptic_curve: 'P-521' },
    ca: 'ECDSA',
    using: 'ecdsa-sha2-nistp521',
    bits: 521,
  },
  {
    options: { private_key_type: 'rsa', key_size: 2048 },
    ca: 'RSA',
    using: 'rsa-sha2-512',
    bits: 2048,
  },
];

function field(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('ERR_INVALID_FIELD');
    return `${(error as AppError).details.field}: ${(error as AppError).message}`;
  }
  throw new Error('accepted');
}

describe('SSH certificate authorities', () => {
  it.each(AUTHORITIES)(
    'generates $using keys whose public half ssh-keygen reads',
    async ({ options, using, bits }) => {
      const authority = await generateAuthority(options);
      expect(authority.keyType).toBe(options.private_key_type);
      expect(
        authority.publicKey.startsWith(`${using === 'rsa-sha2-512' ? 'ssh-rsa' : using} `),
      ).toBe(true);
      expect(authority.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
      const listed = await keygenFingerprint(
        dir.file(`ca-${bits}-${options.private_key_type}.pub`, authority.publicKey),
      );
      expect(listed.bits).toBe(bits);
      expect(parsePublicKey(authority.publicKey).fingerprint).toBe(listed.fingerprint);
    },
  );

  it('defaults to Ed25519 and RSA to 4096 bits', async () => {
    expect((await generateAuthority({})).keyType).toBe('ed25519');
    const rsa = await generateAuthority({ private_key_type: 'rsa' });
    expect(parsePublicKey(rsa.publicKey).bits).toBe(4096);
  });

  it('refuses unknown types, sizes and curves, and options of another type', async () => {
    const reason = async (options: Record<string, unknown>) => {
      const error = await generateAuthority(options).then(
        () => undefined,
        (e: AppError) => e,
      );
      expect(error).toBeInstanceOf(AppError);
      return `${error?.details.field}: ${error?.message}`;
    };
    expect(await reason({ private_key_type: 'dsa' })).toContain('private_key_type:');
    expect(await reason({ private_key_type: 'rsa', key_size: 1024 })).toContain(
      'key_size: "key_size" must be 2048 or 4096',
    );
    expect(await reason({ private_key_type: 'rsa', key_size: '2048' })).toContain('key_size:');
    expect(await reason({ private_key_type: 'ecdsa', elliptic_curve: 'secp256k1' })).toContain(
      'elliptic_curve:',
    );
    expect(await reason({ private_key_type: 'ecdsa', elliptic_curve: 'constructor' })).toContain(
      'elliptic_curve:',
    );
    expect(await reason({ private_key_type: 'ed25519', key_size: 2048 })).toContain(
      'applies only to',
    );
    expect(await reason({ private_key_type: 'rsa', elliptic_curve: 'p256' })).toContain(
      'applies only to',
    );
  });
});

describe('SSH certificates', () => {
  let subjectFingerprint = '';
  let subjectText = '';
  beforeAll(async () => {
    const made = await keygen(dir.path, 'subject', 'ecdsa', 384);
    subjectText = made.pub;
    subjectFingerprint = (await keygenFingerprint(`${made.path}.pub`)).fingerprint;
  });

  it.each(AUTHORITIES)(
    'signs a user certificate with $using that ssh-keygen -L verifies',
    async ({ options, ca, using }) => {
      const authority = await generateAuthority(options);
      const signer = authoritySigner(authority.privateKeyPem);
      expect(signer.keyType).toBe(options.private_key_type);
      const validity = readValidity(
        { valid_after: '2030-01-02T03:04:05Z', valid_until: '2030-01-03T00:00:00+01:00' },
        'user',
      );
      const certificate = signCertificate(
        {
          kind: 'user',
          subject: parsePublicKey(subjectText),
          keyId: 'sucrt_test',
          principals: readPrincipals(['root', 'deploy']),
          ...validity,
          criticalOptions: readCriticalOptions({
            'source-address': '127.0.0.1/32,::1',
            'force-command': '/bin/echo hi',
          }),
          extensions: readExtensions({ 'permit-pty': '', 'custom@example.com': 'value' }),
        },
        signer,
      );
      expect(certificate).toMatch(
        /^ecdsa-sha2-nistp384-cert-v01@openssh\.com [A-Za-z0-9+/]+=* sucrt_test$/,
      );
      const caFingerprint = parsePublicKey(authority.publicKey).fingerprint;
      const listing = await listCertificate(dir.file(`user-${using}-cert.pub`, certificate));
      expect(listing).toMatchObject({
        type: 'ecdsa-sha2-nistp384-cert-v01@openssh.com user certificate',
        publicKey: `ECDSA-CERT ${subjectFingerprint}`,
        signingCa: `${ca} ${caFingerprint} (using ${using})`,
        keyId: '"sucrt_test"',
        valid: 'from 2030-01-02T03:04:05 to 2030-01-02T23:00:00',
        principals: ['root', 'deploy'],
        criticalOptions: ['force-command /bin/echo hi', 'source-address 127.0.0.1/32,::1'],
      });
      expect(listing.extensions).toHaveLength(2);
      expect(listing.extensions[0]).toMatch(/^custom@example\.com/);
      expect(listing.extensions[1]).toBe('permit-pty');
      expect(listing.serial).toMatch(/^\d+$/);
    },
  );

  it('signs a host certificate with no options, and user defaults of permit-pty and permit-user-rc', async () => {
    const authority = await generateAuthority({ private_key_type: 'ed25519' });
    const signer = authoritySigner(authority.privateKeyPem);
    const subject = parsePublicKey(subjectText);
    const now = new Date('2031-05-06T07:08:09.999Z');
    const host = signCertificate(
      {
        kind: 'host',
        subject,
        keyId: 'shcrt_x',
        principals: readPrincipals(['host.example.com', '10.0.0.1']),
        ...readValidity({}, 'host', now),
        criticalOptions: {},
        extensions: {},
      },
      signer,
    );
    expect(await listCertificate(dir.file('host-cert.pub', host))).toMatchObject({
      type: 'ecdsa-sha2-nistp384-cert-v01@openssh.com host certificate',
      valid: 'from 2031-05-06T07:08:09 to 2032-05-05T07:08:09',
      principals: ['host.example.com', '10.0.0.1'],
      criticalOptions: [],
      extensions: [],
    });
    const user = signCertificate(
      {
        kind: 'user',
        subject,
        keyId: 'sucrt_y',
        principals: readPrincipals(undefined),
        ...readValidity({}, 'user', now),
        criticalOptions: readCriticalOptions(undefined),
        extensions: readExtensions(undefined),
      },
      signer,
    );
    expect(await listCertificate(dir.file('user-defaults-cert.pub', user))).toMatchObject({
      valid: 'from 2031-05-06T07:08:09 to 2031-05-07T07:08:09',
      principals: [],
      criticalOptions: [],
      extensions: ['permit-pty', 'permit-user-rc'],
    });
  });

  it('makes certificates ssh-keygen refuses once a byte of the signed part changes', async () => {
    const signer = authoritySigner((await generateAuthority({})).privateKeyPem);
    const certificate = signCertificate(
      {
        kind: 'user',
        subject: parsePublicKey(subjectText),
        keyId: 'k',
        principals: ['root'],
        ...readValidity({}, 'user'),
        criticalOptions: {},
        extensions: {},
      },
      signer,
    );
    const [type, base64, comment] = certificate.split(' ');
    const blob = Buffer.from(base64, 'base64');
    blob[blob.indexOf(Buffer.from('root'))] ^= 1; // "root" → "soot"
    const path = dir.file('tampered-cert.pub', `${type} ${blob.toString('base64')} ${comment}`);
    await expect(listCertificate(path)).rejects.toThrow();
    await listCertificate(dir.file('intact-cert.pub', certificate));
  });

  it('refuses bad validity, principals, critical options and extensions', () => {
    expect(field(() => readValidity({ valid_after: 'tomorrow' }, 'user'))).toMatch(
      /^valid_after: /,
    );
    expect(field(() => readValidity({ valid_until: '2030-01-01' }, 'user'))).toMatch(
      /^valid_until: /,
    );
    expect(
      field(() =>
        readValidity(
          { valid_after: '2030-01-02T00:00:00Z', valid_until: '2030-01-01T00:00:00Z' },
          'host',
        ),
      ),
    ).toContain('later than');
    expect(field(() => readPrincipals('root'))).toMatch(/^principals: /);
    expect(field(() => readPrincipals(['a b']))).toMatch(/^principals: /);
    expect(field(() => readPrincipals(['']))).toMatch(/^principals: /);
    expect(field(() => readPrincipals(['a,b']))).toMatch(/^principals: /);
    expect(field(() => readCriticalOptions({ 'verify-required': '' }))).toContain(
      'only force-command and source-address',
    );
    expect(field(() => readCriticalOptions({ 'force-command': '' }))).toContain(
      'must not be empty',
    );
    expect(field(() => readCriticalOptions({ 'source-address': '10.0.0.0/33' }))).toContain(
      'not an address or CIDR',
    );
    expect(field(() => readCriticalOptions({ 'source-address': 'example.com' }))).toContain(
      'not an address or CIDR',
    );
    expect(field(() => readCriticalOptions(['force-command']))).toMatch(/^critical_options: /);
    expect(field(() => readExtensions({ 'permit-pty': 1 }))).toMatch(/^extensions: /);
    expect(readExtensions({})).toEqual({});
  });
});
