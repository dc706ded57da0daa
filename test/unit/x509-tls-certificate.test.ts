import { createPrivateKey, createPublicKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/shared/errors.ts';
import { readCertificateAuthority } from '../../src/shared/pki/certificate-authority.ts';
import {
  EXAMPLE_CA_PEM,
  EXAMPLE_CERTIFICATE_PEM,
  EXAMPLE_PRIVATE_KEY_PEM,
} from '../../src/shared/pki/examples.ts';
import { readTlsCertificate } from '../../src/shared/pki/tls-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';

// tls_certificates' certificate_pem and private_key_pem read from certificates and keys the real
// openssl command makes: a root, an intermediate, leaves of each key type.

let pki: OpensslPki;
let root: Issued;
let intermediate: Issued;
let leaf: Issued;

const LEAF_SUBJECT =
  '/C=US/ST=California/L=San Francisco/O=Acme Inc/OU=Edge/OU=Platform/CN=app.example.com';
const LEAF_EXTENSIONS = [
  'basicConstraints=critical,CA:FALSE',
  'subjectAltName=DNS:app.example.com,DNS:*.app.example.com,IP:192.0.2.7,IP:2001:db8:0:0:0:0:0:1',
  'keyUsage=critical,digitalSignature,keyEncipherment',
  'extendedKeyUsage=serverAuth,clientAuth',
];

beforeAll(() => {
  pki = new OpensslPki();
  root = pki.selfSigned('root', { subject: '/CN=Acme Root CA', extensions: CA_EXTENSIONS });
  intermediate = pki.issue('intermediate', root, {
    key: 'ecdsa',
    subject: '/O=Acme Inc/CN=Acme Issuing CA',
    extensions: CA_EXTENSIONS,
  });
  leaf = pki.issue('leaf', intermediate, { subject: LEAF_SUBJECT, extensions: LEAF_EXTENSIONS });
});
afterAll(() => pki.close());

function opensslDate(cert: string, flag: string): string {
  return new Date(pki.x509Field(cert, flag)).toISOString().replace('.000Z', 'Z');
}

/** The AppError reading throws: its field and message. */
function refusal(certificatePem: string, privateKeyPem: string): { field: unknown; msg: string } {
  try {
    readTlsCertificate(certificatePem, privateKeyPem);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    expect({ code: error.code, status: error.status }).toEqual({
      code: 'ERR_INVALID_FIELD',
      status: 400,
    });
    return { field: error.details.field, msg: error.message };
  }
  throw new Error('expected a refusal');
}

describe('a TLS certificate read from certificate_pem and private_key_pem', () => {
  it('shows every field of SPEC.md from the leaf of a chain, as openssl sees it', () => {
    const chain = leaf.cert + intermediate.cert;
    const { fields, privateKeyPem } = readTlsCertificate(chain, leaf.key);
    expect(fields).toEqual({
      certificate_pem: chain,
      subject_common_name: 'app.example.com',
      subject_alternative_names: {
        dns_names: ['app.example.com', '*.app.example.com'],
        ips: ['192.0.2.7', '2001:db8::1'],
      },
      issued_at: null,
      not_before: opensslDate(leaf.cert, '-startdate'),
      not_after: opensslDate(leaf.cert, '-enddate'),
      key_usages: ['digital_signature', 'key_encipherment'],
      extended_key_usages: ['server_auth', 'client_auth'],
      private_key_type: 'rsa',
      issuer_common_name: 'Acme Issuing CA',
      serial_number: pki.x509Field(leaf.cert, '-serial').toLowerCase(),
      subject_organization: 'Acme Inc',
      subject_organizational_unit: 'Edge, Platform',
      subject_locality: 'San Francisco',
      subject_province: 'California',
      subject_country: 'US',
    });
    expect(Object.keys(fields)).toEqual([
      'certificate_pem',
      'subject_common_name',
      'subject_alternative_names',
      'issued_at',
      'not_before',
      'not_after',
      'key_usages',
      'extended_key_usages',
      'private_key_type',
      'issuer_common_name',
      'serial_number',
      'subject_organization',
      'subject_organizational_unit',
      'subject_locality',
      'subject_province',
      'subject_country',
    ]);
    // The serial keeps its leading zero (openssl-pki makes serials starting 0a…), as ngrok shows.
    expect(fields.serial_number).toMatch(/^0a[0-9a-f]+$/);
    // The key is handed back as PKCS#8 for sealing, the same key, never in the shown fields.
    expect(privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(createPrivateKey(privateKeyPem).equals(createPrivateKey(leaf.key))).toBe(true);
    expect(JSON.stringify(fields)).not.toContain('PRIVATE KEY');
  });

  it('reads ECDSA and Ed25519 leaves, and a leaf with nothing but a subject', () => {
    const ec = pki.issue('leaf-ec', root, {
      key: 'ecdsa',
      subject: '/CN=ec.example.com',
      extensions: ['keyUsage=critical,keyAgreement,decipherOnly', 'extendedKeyUsage=1.2.3.4.5'],
    });
    expect(readTlsCertificate(ec.cert, ec.key).fields).toMatchObject({
      private_key_type: 'ecdsa',
      key_usages: ['key_agreement', 'decipher_only'],
      extended_key_usages: ['1.2.3.4.5'],
      issuer_common_name: 'Acme Root CA',
    });
    const ed = pki.issue('leaf-ed', root, { key: 'ed25519', subject: '/CN=ed.example.com' });
    expect(readTlsCertificate(ed.cert, ed.key).fields).toMatchObject({
      private_key_type: 'ed25519',
      subject_common_name: 'ed.example.com',
      subject_alternative_names: { dns_names: [], ips: [] },
      key_usages: [],
      extended_key_usages: [],
      subject_organization: '',
      subject_organizational_unit: '',
      subject_locality: '',
      subject_province: '',
      subject_country: '',
    });
  });

  it('takes keys in PKCS#1 and SEC1 (with EC PARAMETERS) as well as PKCS#8', () => {
    const pkcs1 = pki.openssl(['pkey', '-traditional'], leaf.key);
    expect(pkcs1).toMatch(/^-----BEGIN RSA PRIVATE KEY-----/);
    expect(readTlsCertificate(leaf.cert, pkcs1).fields.private_key_type).toBe('rsa');
    const ec = pki.issue('leaf-sec1', root, { key: 'ecdsa', subject: '/CN=sec1.example.com' });
    const sec1 =
      pki.openssl(['ecparam', '-name', 'prime256v1']) +
      pki.openssl(['pkey', '-traditional'], ec.key);
    expect(sec1).toMatch(/BEGIN EC PARAMETERS[\s\S]*BEGIN EC PRIVATE KEY/);
    expect(readTlsCertificate(ec.cert, sec1).fields.private_key_type).toBe('ecdsa');
  });

  it('takes an expired certificate and shows its dates as they are', () => {
    const old = pki.issueExpired('leaf-old', root, 'old.example.com');
    expect(readTlsCertificate(old.cert, old.key).fields).toMatchObject({
      subject_common_name: 'old.example.com',
      not_before: '2020-01-01T00:00:00Z',
      not_after: '2020-02-01T00:00:00Z',
    });
  });

  it('refuses a key that does not match the leaf', () => {
    const other = pki.newKey('other');
    expect(refusal(leaf.cert, other)).toEqual({
      field: 'private_key_pem',
      msg: expect.stringMatching(/does not match the public key of the leaf/),
    });
    const edKey = pki.newKey('other-ed', 'ed25519');
    expect(refusal(leaf.cert, edKey).field).toBe('private_key_pem');
    // The intermediate's key with the chain: the leaf is what must match.
    expect(refusal(leaf.cert + intermediate.cert, intermediate.key).msg).toMatch(/leaf/);
  });

  it('refuses a chain that is not leaf first, each issued by the next', () => {
    expect(refusal(intermediate.cert + leaf.cert, leaf.key)).toEqual({
      field: 'certificate_pem',
      msg: expect.stringMatching(/leaf first: certificate 2 did not issue certificate 1/),
    });
    expect(refusal(leaf.cert + root.cert, leaf.key).msg).toMatch(/certificate 2 did not issue/);
    expect(
      readTlsCertificate(leaf.cert + intermediate.cert + root.cert, leaf.key).fields,
    ).toBeTruthy();
  });

  it('refuses keys of types and sizes a TLS server should not use', () => {
    for (const [kind, why] of [
      ['rsa1024', /at least 2048 bits/],
      ['secp256k1', /P-256, P-384 or P-521/],
      ['ed448', /"ed448" key is not taken/],
    ] as const) {
      const weak = pki.selfSigned(`weak-${kind}`, {
        key: kind,
        subject: `/CN=${kind}.example.com`,
      });
      expect(refusal(weak.cert, weak.key)).toEqual({
        field: 'private_key_pem',
        msg: expect.stringMatching(why),
      });
    }
  });

  it('refuses encrypted keys, asking for the key without a passphrase', () => {
    const pkcs8 = pki.openssl(
      ['pkcs8', '-topk8', '-v2', 'aes-256-cbc', '-passout', 'pass:x'],
      leaf.key,
    );
    expect(refusal(leaf.cert, pkcs8)).toEqual({
      field: 'private_key_pem',
      msg: expect.stringMatching(/is encrypted; upload the key without a passphrase/),
    });
    const legacy = pki.openssl(['pkey', '-traditional', '-aes256', '-passout', 'pass:x'], leaf.key);
    expect(legacy).toContain('Proc-Type: 4,ENCRYPTED');
    expect(refusal(leaf.cert, legacy)).toEqual({
      field: 'private_key_pem',
      msg: expect.stringMatching(/RFC 1421 headers/),
    });
  });

  it('refuses what is not PEM, a key where certificates go, and certificates where a key goes', () => {
    expect(refusal('garbage', leaf.key)).toEqual({
      field: 'certificate_pem',
      msg: expect.stringMatching(/must be PEM/),
    });
    expect(refusal(leaf.cert, 'garbage')).toEqual({
      field: 'private_key_pem',
      msg: expect.stringMatching(/must be PEM/),
    });
    expect(refusal(leaf.cert + leaf.key, leaf.key)).toEqual({
      field: 'certificate_pem',
      msg: expect.stringMatching(/only certificates; block 2 is a "PRIVATE KEY"/),
    });
    expect(refusal(leaf.cert, leaf.cert).msg).toMatch(/must be a private key, not a "CERTIFICATE"/);
    expect(refusal(leaf.cert, leaf.key + leaf.key).msg).toMatch(/exactly one private key, not 2/);
    const broken = leaf.key.replace(/\n[A-Za-z0-9+/]{64}\n/, '\nAAAA\n');
    expect(refusal(leaf.cert, broken).msg).toMatch(/not a valid PRIVATE KEY/);
    const publicKey = createPublicKey(leaf.key).export({ type: 'spki', format: 'pem' }).toString();
    expect(refusal(leaf.cert, publicKey).msg).toMatch(/not a "PUBLIC KEY"/);
  });

  it('refuses a chain longer than ten certificates', () => {
    expect(refusal(leaf.cert.repeat(11), leaf.key).msg).toMatch(
      /holds 11 certificates; at most 10/,
    );
  });

  it('takes the examples the API documents and the generated tests create', () => {
    expect(readCertificateAuthority(EXAMPLE_CA_PEM).subject_common_name).toBe('Example Client CA');
    const example = readTlsCertificate(EXAMPLE_CERTIFICATE_PEM, EXAMPLE_PRIVATE_KEY_PEM).fields;
    expect(example).toMatchObject({
      private_key_type: 'ed25519',
      subject_alternative_names: { dns_names: ['app.example.com', '*.app.example.com'], ips: [] },
    });
    expect(Date.parse(example.not_after)).toBeGreaterThan(Date.parse('2100-01-01'));
  });
});
