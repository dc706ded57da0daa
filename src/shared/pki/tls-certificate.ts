import { createPrivateKey, type KeyObject } from 'node:crypto';
import { AppError } from '../errors.ts';
import { type PemBlock, pemBlocks } from './pem.ts';
import {
  certificatePem,
  extendedKeyUsages,
  keyUsages,
  NAME_ATTRIBUTES,
  nameAttribute,
  readCertificates,
  serialNumber,
  subjectAlternativeNames,
  validity,
  type X509,
} from './x509.ts';

// A TLS certificate of an account (ngrok's /tls_certificates): a chain, leaf first, and the leaf's
// private key, to terminate TLS with. The fields shown are read from the leaf; the private key is
// taken, checked against the leaf, and handed back only to be sealed (never shown).

/** What a TLS certificate shows (the spec's table "TLS certificate events", in its order). */
export interface TlsCertificateFields {
  [field: string]: string | string[] | null | { dns_names: string[]; ips: string[] };
  certificate_pem: string;
  subject_common_name: string;
  subject_alternative_names: { dns_names: string[]; ips: string[] };
  issued_at: string | null;
  not_before: string;
  not_after: string;
  key_usages: string[];
  extended_key_usages: string[];
  private_key_type: PrivateKeyType;
  issuer_common_name: string;
  serial_number: string;
  subject_organization: string;
  subject_organizational_unit: string;
  subject_locality: string;
  subject_province: string;
  subject_country: string;
}

/** The key types ngrok takes, by its names. */
export type PrivateKeyType = 'rsa' | 'ecdsa' | 'ed25519';

/** An uploaded TLS certificate: the fields to show and the private key to seal (PKCS#8 PEM). */
export interface TlsCertificateUpload {
  fields: TlsCertificateFields;
  privateKeyPem: string;
}

const CERT_FIELD = 'certificate_pem';
const KEY_FIELD = 'private_key_pem';
/** A longer chain is no chain a TLS client walks; the bound also caps the signature checks. */
const MAX_CHAIN = 10;
const MIN_RSA_BITS = 2048;
const EC_CURVES = ['prime256v1', 'secp384r1', 'secp521r1'];

/** How each PEM private key label is encoded, for createPrivateKey. */
const KEY_ENCODINGS: Record<string, 'pkcs8' | 'pkcs1' | 'sec1'> = {
  'PRIVATE KEY': 'pkcs8',
  'RSA PRIVATE KEY': 'pkcs1',
  'EC PRIVATE KEY': 'sec1',
};

/**
 * Reads an upload: the chain must be certificates each issued by the next one, and the key must
 * be RSA (at least 2048 bits), ECDSA (P-256, P-384, P-521) or Ed25519, unencrypted, and match
 * the leaf. An expired certificate is taken and shown as it is.
 */
export function readTlsCertificate(
  certificatePemText: string,
  privateKeyPemText: string,
): TlsCertificateUpload {
  const chain = readCertificates(certificatePemText, CERT_FIELD);
  checkChain(chain);
  const leaf = chain[0];
  const key = readPrivateKey(privateKeyPemText);
  const privateKeyType = keyType(key);
  if (!leaf.node.checkPrivateKey(key)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${KEY_FIELD}" does not match the public key of the leaf (the first certificate of "${CERT_FIELD}")`,
      { field: KEY_FIELD },
    );
  }
  return {
    fields: leafFields(chain, privateKeyType),
    privateKeyPem: key.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

function checkChain(chain: X509[]): void {
  if (chain.length > MAX_CHAIN) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${CERT_FIELD}" holds ${chain.length} certificates; at most ${MAX_CHAIN} are taken`,
      { field: CERT_FIELD },
    );
  }
  for (let i = 0; i + 1 < chain.length; i++) {
    const [child, issuer] = [chain[i].node, chain[i + 1].node];
    if (!child.checkIssued(issuer) || !child.verify(issuer.publicKey)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"${CERT_FIELD}" must be a chain, leaf first: certificate ${i + 2} did not issue certificate ${i + 1}`,
        { field: CERT_FIELD },
      );
    }
  }
}

function readPrivateKey(text: string): KeyObject {
  // `openssl ecparam -genkey` writes an EC PARAMETERS block before the key: it says nothing more.
  const blocks = pemBlocks(text, KEY_FIELD).filter((block) => block.label !== 'EC PARAMETERS');
  if (blocks.length !== 1) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${KEY_FIELD}" must hold exactly one private key, not ${blocks.length} PEM blocks`,
      { field: KEY_FIELD },
    );
  }
  return privateKey(blocks[0]);
}

function privateKey(block: PemBlock): KeyObject {
  if (block.label === 'ENCRYPTED PRIVATE KEY') {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${KEY_FIELD}" is encrypted; upload the key without a passphrase (it is encrypted at rest)`,
      { field: KEY_FIELD },
    );
  }
  const type = KEY_ENCODINGS[block.label];
  if (type === undefined) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${KEY_FIELD}" must be a private key, not a "${block.label}"`,
      { field: KEY_FIELD },
    );
  }
  try {
    return createPrivateKey({ key: block.der, format: 'der', type });
  } catch (error) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${KEY_FIELD}" is not a valid ${block.label}`,
      { field: KEY_FIELD },
      { cause: error },
    );
  }
}

function keyType(key: KeyObject): PrivateKeyType {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa':
      if ((details.modulusLength ?? 0) >= MIN_RSA_BITS) return 'rsa';
      throw unsupportedKey(`an RSA key must have at least ${MIN_RSA_BITS} bits`);
    case 'ec':
      if (EC_CURVES.includes(details.namedCurve ?? '')) return 'ecdsa';
      throw unsupportedKey('an ECDSA key must be on P-256, P-384 or P-521');
    case 'ed25519':
      return 'ed25519';
    default:
      throw unsupportedKey(`a "${key.asymmetricKeyType}" key is not taken`);
  }
}

function unsupportedKey(why: string): AppError {
  return new AppError(
    'ERR_INVALID_FIELD',
    `"${KEY_FIELD}" must be an RSA, ECDSA or Ed25519 key: ${why}`,
    { field: KEY_FIELD },
  );
}

function leafFields(chain: X509[], privateKeyType: PrivateKeyType): TlsCertificateFields {
  const leaf = chain[0];
  const { subject, issuer } = leaf.asn.tbsCertificate;
  const subjectField = (oid: string) => nameAttribute(subject, oid);
  return {
    certificate_pem: chain.map(certificatePem).join(''),
    subject_common_name: subjectField(NAME_ATTRIBUTES.common_name),
    subject_alternative_names: subjectAlternativeNames(leaf),
    issued_at: null,
    ...validity(leaf),
    key_usages: keyUsages(leaf),
    extended_key_usages: extendedKeyUsages(leaf),
    private_key_type: privateKeyType,
    issuer_common_name: nameAttribute(issuer, NAME_ATTRIBUTES.common_name),
    serial_number: serialNumber(leaf),
    subject_organization: subjectField(NAME_ATTRIBUTES.organization),
    subject_organizational_unit: subjectField(NAME_ATTRIBUTES.organizational_unit),
    subject_locality: subjectField(NAME_ATTRIBUTES.locality),
    subject_province: subjectField(NAME_ATTRIBUTES.province),
    subject_country: subjectField(NAME_ATTRIBUTES.country),
  };
}
