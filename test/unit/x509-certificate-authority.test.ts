import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/shared/errors.ts';
import { readCertificateAuthority } from '../../src/shared/pki/certificate-authority.ts';
import { toPem } from '../../src/shared/pki/pem.ts';
import { readTlsCertificate } from '../../src/shared/pki/tls-certificate.ts';
import { CA_EXTENSIONS, type Issued, OpensslPki } from '../helpers/openssl-pki.ts';

// certificate_authorities' ca_pem read from certificates the real openssl command makes.

let pki: OpensslPki;
let root: Issued;

beforeAll(() => {
  pki = new OpensslPki();
  root = pki.selfSigned('root', {
    subject: '/C=DE/O=Acme/CN=Acme Root CA',
    extensions: CA_EXTENSIONS,
    days: 3650,
  });
});
afterAll(() => pki.close());

/** openssl's date for `flag` (-startdate / -enddate) as RFC 3339 to the second. */
function opensslDate(cert: string, flag: string): string {
  return new Date(pki.x509Field(cert, flag)).toISOString().replace('.000Z', 'Z');
}

/** The AppError `read` throws. */
function refusal(read: () => unknown): AppError {
  try {
    read();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

function expectRefused(caPem: string, msgPart: string | RegExp): void {
  const error = refusal(() => readCertificateAuthority(caPem));
  expect({ code: error.code, status: error.status, details: error.details }).toEqual({
    code: 'ERR_INVALID_FIELD',
    status: 400,
    details: { field: 'ca_pem' },
  });
  expect(error.message).toMatch(msgPart);
  expect(error.message).toContain('"ca_pem"');
}

describe('a certificate authority read from ca_pem', () => {
  it('shows an RSA root CA as openssl sees it', () => {
    expect(readCertificateAuthority(root.cert)).toEqual({
      ca_pem: root.cert,
      subject_common_name: 'Acme Root CA',
      not_before: opensslDate(root.cert, '-startdate'),
      not_after: opensslDate(root.cert, '-enddate'),
      key_usages: ['cert_sign', 'crl_sign'],
      extended_key_usages: [],
    });
  });

  it('shows an ECDSA intermediate with its extended key usages, in the fields’ order', () => {
    const intermediate = pki.issue('ca-ec', root, {
      key: 'ecdsa',
      subject: '/CN=Acme Issuing CA 1',
      extensions: [
        'basicConstraints=critical,CA:TRUE,pathlen:0',
        'keyUsage=critical,digitalSignature,keyCertSign,cRLSign',
        'extendedKeyUsage=serverAuth,clientAuth,1.3.6.1.4.1.99999.1',
      ],
    });
    const fields = readCertificateAuthority(intermediate.cert);
    expect(Object.keys(fields)).toEqual([
      'ca_pem',
      'subject_common_name',
      'not_before',
      'not_after',
      'key_usages',
      'extended_key_usages',
    ]);
    expect(fields.subject_common_name).toBe('Acme Issuing CA 1');
    expect(fields.key_usages).toEqual(['digital_signature', 'cert_sign', 'crl_sign']);
    expect(fields.extended_key_usages).toEqual([
      'server_auth',
      'client_auth',
      '1.3.6.1.4.1.99999.1',
    ]);
  });

  it('takes an Ed25519 CA without keyUsage, and one whose PEM is wrapped in text and CRLFs', () => {
    const ed = pki.selfSigned('ca-ed', {
      key: 'ed25519',
      subject: '/CN=Édition CA ✓',
      extensions: ['basicConstraints=critical,CA:TRUE'],
    });
    expect(readCertificateAuthority(ed.cert)).toMatchObject({
      subject_common_name: 'Édition CA ✓',
      key_usages: [],
      extended_key_usages: [],
    });
    const wrapped = `subject=CN = Acme Root CA\r\n${root.cert.replaceAll('\n', '\r\n')}\r\ntrailing note\r\n`;
    expect(readCertificateAuthority(wrapped).ca_pem).toBe(root.cert);
  });

  it('takes an expired CA and shows its dates as they are', () => {
    const expired = pki.issueExpired('ca-old', root, 'Old CA', CA_EXTENSIONS);
    expect(readCertificateAuthority(expired.cert)).toMatchObject({
      subject_common_name: 'Old CA',
      not_before: '2020-01-01T00:00:00Z',
      not_after: '2020-02-01T00:00:00Z',
    });
  });

  it('refuses a certificate that is not a CA', () => {
    const leaf = pki.issue('leaf-no-bc', root, { subject: '/CN=leaf.example.com' });
    expectRefused(leaf.cert, /not a certificate authority.*basicConstraints.*CA:TRUE/);
    const caFalse = pki.issue('leaf-ca-false', root, {
      subject: '/CN=leaf2.example.com',
      extensions: ['basicConstraints=critical,CA:FALSE'],
    });
    expectRefused(caFalse.cert, /basicConstraints/);
  });

  it('refuses a CA whose keyUsage does not allow signing certificates', () => {
    const noSign = pki.selfSigned('ca-no-sign', {
      subject: '/CN=No Sign CA',
      extensions: ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,digitalSignature'],
    });
    expectRefused(noSign.cert, /keyCertSign/);
  });

  it('refuses what is not one PEM certificate', () => {
    expectRefused('hello, I am not PEM', /must be PEM: no "-----BEGIN/);
    expectRefused('', /must be PEM/);
    expectRefused(
      '-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n',
      /not valid base64/,
    );
    expectRefused(
      '-----BEGIN CERTIFICATE-----\nMIIB\n-----END PRIVATE KEY-----\n',
      /BEGIN CERTIFICATE.*END PRIVATE KEY/,
    );
    const notDer = `-----BEGIN CERTIFICATE-----\n${Buffer.from('just some bytes').toString('base64')}\n-----END CERTIFICATE-----\n`;
    expectRefused(notDer, /first block is not a valid X.509 certificate/);
    expectRefused(root.key, /only certificates; the first block is a "PRIVATE KEY"/);
    expectRefused(root.cert + root.cert, /exactly one certificate, not 2/);
  });

  it('answers any corruption of a certificate with a 400, never a crash', () => {
    const leaf = pki.issue('fuzzed', root, {
      subject: '/C=US/O=Acme/OU=Edge/CN=fuzz.example.com',
      extensions: [
        'basicConstraints=critical,CA:TRUE',
        'subjectAltName=DNS:fuzz.example.com,IP:192.0.2.1,IP:2001:db8::1',
        'keyUsage=critical,digitalSignature,keyCertSign',
        'extendedKeyUsage=serverAuth',
      ],
    });
    const der = Buffer.from(leaf.cert.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    let refused = 0;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(der.length - 1), fc.integer({ min: 0, max: 255 })), {
          minLength: 1,
          maxLength: 4,
        }),
        (flips) => {
          const bad = Buffer.from(der);
          for (const [at, value] of flips) bad[at] = value;
          for (const read of [
            () => readCertificateAuthority(toPem('CERTIFICATE', bad)),
            () => readTlsCertificate(toPem('CERTIFICATE', bad), leaf.key),
          ]) {
            try {
              read();
            } catch (error) {
              expect(error).toBeInstanceOf(AppError);
              refused++;
            }
          }
        },
      ),
      { numRuns: 400, seed: 20261123 },
    );
    expect(refused).toBeGreaterThan(100);
  });
});
