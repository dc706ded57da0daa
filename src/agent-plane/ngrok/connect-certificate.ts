import { createHash, generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import {
  AlgorithmIdentifier,
  AttributeTypeAndValue,
  BasicConstraints,
  Certificate,
  Extension,
  Extensions,
  GeneralName,
  id_ce_basicConstraints,
  id_ce_subjectAltName,
  Name,
  RelativeDistinguishedName,
  SubjectAlternativeName,
  SubjectPublicKeyInfo,
  TBSCertificate,
  Validity,
  Version,
} from '@peculiar/asn1-x509';
import { toPem } from '../../shared/pki/pem.ts';

// The agent listener's own certificate for connect.<SERVICE_DOMAIN>, when AGENT_TLS_CERT_FILE is
// not set: a private CA and a certificate it signs, made once into DATA_DIR/agent-tls/ (ngrok's
// Rust SDK takes no CA certificate as a server certificate, so a self-signed leaf would not do).
// For local use: agents trust ca.pem (session_ca_cert); production sets the files.

/** ECDSA with SHA-256 (RFC 5758). */
const ECDSA_SHA256 = '1.2.840.10045.4.3.2';
const COMMON_NAME = '2.5.4.3';
/** Ten years: a local CA and certificate nobody renews. */
const LIFETIME_MS = 10 * 365 * 24 * 3600 * 1000;

function name(commonName: string): Name {
  const attribute = new AttributeTypeAndValue({ type: COMMON_NAME });
  attribute.value.utf8String = commonName;
  return new Name([new RelativeDistinguishedName([attribute])]);
}

function extension(id: string, critical: boolean, value: unknown): Extension {
  return new Extension({
    extnID: id,
    critical,
    extnValue: new OctetString(AsnConvert.serialize(value)),
  });
}

/**
 * 16 bytes of a digest as a DER INTEGER's content: its own ArrayBuffer (a Buffer's `.buffer` is
 * Node's shared pool), positive, and with a non-zero first byte (a leading zero before a byte
 * below 0x80 is padding DER forbids: OpenSSL refuses such a certificate as "illegal padding").
 */
function serialNumber(spki: Buffer, now: number): ArrayBuffer {
  const bytes = new Uint8Array(
    createHash('sha256').update(spki).update(String(now)).digest(),
  ).slice(0, 16);
  bytes[0] = (bytes[0] & 0x7f) | 0x40;
  return bytes.buffer;
}

/** A DER certificate for `spki` (DER), signed by `issuerKey` in the issuer's name. */
function certificate(opts: {
  subject: string;
  issuer: string;
  spki: Buffer;
  issuerKey: Parameters<typeof sign>[2];
  ca: boolean;
  dnsNames: string[];
}): Buffer {
  const now = Date.now();
  const extensions = [
    extension(id_ce_basicConstraints, true, new BasicConstraints({ cA: opts.ca })),
  ];
  if (opts.dnsNames.length > 0) {
    const names = opts.dnsNames.map((dNSName) => new GeneralName({ dNSName }));
    extensions.push(extension(id_ce_subjectAltName, false, new SubjectAlternativeName(names)));
  }
  const algorithm = new AlgorithmIdentifier({ algorithm: ECDSA_SHA256 });
  const tbs = new TBSCertificate({
    version: Version.v3,
    serialNumber: serialNumber(opts.spki, now),
    signature: algorithm,
    issuer: name(opts.issuer),
    validity: new Validity({
      notBefore: new Date(now - 3600_000),
      notAfter: new Date(now + LIFETIME_MS),
    }),
    subject: name(opts.subject),
    subjectPublicKeyInfo: AsnConvert.parse(opts.spki, SubjectPublicKeyInfo),
    extensions: new Extensions(extensions),
  });
  const tbsDer = Buffer.from(AsnConvert.serialize(tbs));
  const signature = sign('sha256', tbsDer, opts.issuerKey);
  const cert = new Certificate({
    tbsCertificate: tbs,
    signatureAlgorithm: algorithm,
    signatureValue: new Uint8Array(signature).buffer,
  });
  return Buffer.from(AsnConvert.serialize(cert));
}

/**
 * Makes the local CA and the connect name's certificate into `files` (their directory created
 * 0700, the key 0600); answers the CA's SHA-256 fingerprint.
 */
export async function makeConnectCertificate(
  files: { caFile: string; certFile: string; keyFile: string },
  connectName: string,
): Promise<string> {
  const ca = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const leaf = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = (key: typeof ca.publicKey) => key.export({ type: 'spki', format: 'der' });
  const caName = `Agent Ingress local CA (${connectName})`;
  const caDer = certificate({
    subject: caName,
    issuer: caName,
    spki: spki(ca.publicKey),
    issuerKey: ca.privateKey,
    ca: true,
    dnsNames: [],
  });
  const leafDer = certificate({
    subject: connectName,
    issuer: caName,
    spki: spki(leaf.publicKey),
    issuerKey: ca.privateKey,
    ca: false,
    dnsNames: [connectName],
  });
  await mkdir(dirname(files.keyFile), { recursive: true, mode: 0o700 });
  const keyPem = leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  await writeFile(files.keyFile, keyPem, { mode: 0o600 });
  await writeFile(files.certFile, toPem('CERTIFICATE', leafDer));
  await writeFile(files.caFile, toPem('CERTIFICATE', caDer));
  return new X509Certificate(caDer).fingerprint256;
}
