import { createHash, generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
    serialNumber: createHash('sha256')
      .update(opts.spki)
      .update(String(now))
      .digest()
      .subarray(0, 16)
      .map((b, i) => (i === 0 ? b & 0x7f : b)).buffer as ArrayBuffer,
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

/** The files of the generated certificate. */
export interface ConnectFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA's SHA-256 fingerprint, for people to check what they trust. */
  caFingerprint: string;
}

/** The certificate for `connectName` in `dataDir`, made on first use. */
export async function connectCertificate(
  dataDir: string,
  connectName: string,
): Promise<ConnectFiles> {
  const dir = join(dataDir, 'agent-tls');
  const files = {
    caFile: join(dir, 'ca.pem'),
    certFile: join(dir, 'cert.pem'),
    keyFile: join(dir, 'key.pem'),
  };
  const existing = await readFile(files.caFile, 'utf8').catch(() => undefined);
  if (existing !== undefined) {
    return { ...files, caFingerprint: new X509Certificate(existing).fingerprint256 };
  }
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
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const keyPem = leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  await writeFile(files.keyFile, keyPem, { mode: 0o600 });
  await writeFile(files.certFile, toPem('CERTIFICATE', leafDer));
  await writeFile(files.caFile, toPem('CERTIFICATE', caDer));
  return { ...files, caFingerprint: new X509Certificate(caDer).fingerprint256 };
}
