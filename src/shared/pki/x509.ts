import { X509Certificate } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  BasicConstraints,
  Certificate,
  ExtendedKeyUsage,
  id_ce_basicConstraints,
  id_ce_extKeyUsage,
  id_ce_keyUsage,
  id_ce_subjectAltName,
  KeyUsage,
  KeyUsageFlags,
  type Name,
  SubjectAlternativeName,
} from '@peculiar/asn1-x509';
import { AppError } from '../errors.ts';
import { type PemBlock, pemBlocks } from './pem.ts';

// One X.509 certificate read twice: by node:crypto (OpenSSL: the DER is well formed, signatures,
// issuance and key matching) and by @peculiar/asn1-x509 (the structured subject, SANs, key usages,
// which node:crypto gives only as display strings or not at all). Fields are named as ngrok's API
// names them; key usages use the names of Go's crypto/x509 constants in snake_case (ngrok's
// service is written in Go, and its public definitions leave the values unnamed).

/** A certificate as both libraries read it, its extensions decoded (absent: undefined). */
export interface X509 {
  /** OpenSSL's view: signatures, issuance, key matching, the public key. */
  node: X509Certificate;
  /** The decoded ASN.1 structure. */
  asn: Certificate;
  basicConstraints?: BasicConstraints;
  keyUsage?: KeyUsage;
  extendedKeyUsage?: ExtendedKeyUsage;
  subjectAltName?: SubjectAlternativeName;
}

/** keyUsage bits in RFC 5280 order, by the names shown. */
const KEY_USAGES: [KeyUsageFlags, string][] = [
  [KeyUsageFlags.digitalSignature, 'digital_signature'],
  [KeyUsageFlags.nonRepudiation, 'content_commitment'],
  [KeyUsageFlags.keyEncipherment, 'key_encipherment'],
  [KeyUsageFlags.dataEncipherment, 'data_encipherment'],
  [KeyUsageFlags.keyAgreement, 'key_agreement'],
  [KeyUsageFlags.keyCertSign, 'cert_sign'],
  [KeyUsageFlags.cRLSign, 'crl_sign'],
  [KeyUsageFlags.encipherOnly, 'encipher_only'],
  [KeyUsageFlags.decipherOnly, 'decipher_only'],
];

const EXTENDED_KEY_USAGES: Record<string, string> = {
  '2.5.29.37.0': 'any',
  '1.3.6.1.5.5.7.3.1': 'server_auth',
  '1.3.6.1.5.5.7.3.2': 'client_auth',
  '1.3.6.1.5.5.7.3.3': 'code_signing',
  '1.3.6.1.5.5.7.3.4': 'email_protection',
  '1.3.6.1.5.5.7.3.5': 'ipsec_end_system',
  '1.3.6.1.5.5.7.3.6': 'ipsec_tunnel',
  '1.3.6.1.5.5.7.3.7': 'ipsec_user',
  '1.3.6.1.5.5.7.3.8': 'time_stamping',
  '1.3.6.1.5.5.7.3.9': 'ocsp_signing',
  '1.3.6.1.4.1.311.10.3.3': 'microsoft_server_gated_crypto',
  '2.16.840.1.113730.4.1': 'netscape_server_gated_crypto',
  '1.3.6.1.4.1.311.2.1.22': 'microsoft_commercial_code_signing',
  '1.3.6.1.4.1.311.61.1.1': 'microsoft_kernel_code_signing',
};

/** Subject attribute types by their ngrok field suffix. */
export const NAME_ATTRIBUTES = {
  common_name: '2.5.4.3',
  organization: '2.5.4.10',
  organizational_unit: '2.5.4.11',
  locality: '2.5.4.7',
  province: '2.5.4.8',
  country: '2.5.4.6',
} as const;

/** The certificates of `text`, in order; anything but CERTIFICATE blocks is a 400 on `field`. */
export function readCertificates(text: string, field: string): X509[] {
  return pemBlocks(text, field).map((block, index) => readCertificate(block, field, index));
}

function readCertificate(block: PemBlock, field: string, index: number): X509 {
  const which = index === 0 ? 'the first block' : `block ${index + 1}`;
  if (block.label !== 'CERTIFICATE') {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${field}" must hold only certificates; ${which} is a "${block.label}"`,
      { field },
    );
  }
  try {
    // Everything is decoded here, so that a malformed part is this 400 and never a 500 later.
    const asn = AsnConvert.parse(block.der, Certificate);
    const decoded = <T>(oid: string, type: new () => T): T | undefined => {
      const found = asn.tbsCertificate.extensions?.find((ext) => ext.extnID === oid);
      return found === undefined ? undefined : AsnConvert.parse(found.extnValue, type);
    };
    const cert: X509 = {
      node: new X509Certificate(block.der),
      asn,
      basicConstraints: decoded(id_ce_basicConstraints, BasicConstraints),
      keyUsage: decoded(id_ce_keyUsage, KeyUsage),
      extendedKeyUsage: decoded(id_ce_extKeyUsage, ExtendedKeyUsage),
      subjectAltName: decoded(id_ce_subjectAltName, SubjectAlternativeName),
    };
    validity(cert); // a date OpenSSL cannot represent throws here
    return cert;
  } catch (error) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${field}": ${which} is not a valid X.509 certificate`,
      { field },
      { cause: error },
    );
  }
}

/** The certificate as PEM, rebuilt from its DER (no surrounding text, LF line ends). */
export function certificatePem(cert: X509): string {
  return cert.node.toString();
}

/** Whether basicConstraints says CA:TRUE (absent means not a CA). */
export function isCertificateAuthority(cert: X509): boolean {
  return cert.basicConstraints?.cA === true;
}

/** The keyUsage bits set, by name; empty when the extension is absent. */
export function keyUsages(cert: X509): string[] {
  const bits = cert.keyUsage?.toNumber() ?? 0;
  return KEY_USAGES.filter(([flag]) => (bits & flag) !== 0).map(([, name]) => name);
}

/** The extendedKeyUsage purposes by name; an unnamed purpose as its OID. */
export function extendedKeyUsages(cert: X509): string[] {
  const usage = cert.extendedKeyUsage ?? [];
  return usage.map((oid) => EXTENDED_KEY_USAGES[oid] ?? oid);
}

/** The DNS names and IP addresses of subjectAltName. */
export function subjectAlternativeNames(cert: X509): { dns_names: string[]; ips: string[] } {
  const names = cert.subjectAltName ?? [];
  const dns_names: string[] = [];
  const ips: string[] = [];
  for (const name of names) {
    if (name.dNSName !== undefined) dns_names.push(name.dNSName);
    if (name.iPAddress !== undefined) ips.push(name.iPAddress);
  }
  return { dns_names, ips };
}

/** The values of attribute `oid` in `name`, joined by ", " when it occurs more than once. */
export function nameAttribute(name: Name, oid: string): string {
  const values: string[] = [];
  for (const rdn of name) {
    for (const attribute of rdn) {
      if (attribute.type === oid) values.push(attribute.value.toString());
    }
  }
  return values.join(', ');
}

/** The validity bounds as RFC 3339 in UTC, to the second (as ngrok shows them). */
export function validity(cert: X509): { not_before: string; not_after: string } {
  return {
    not_before: rfc3339(cert.node.validFromDate),
    not_after: rfc3339(cert.node.validToDate),
  };
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The serial number in lower-case hex, as OpenSSL prints it. */
export function serialNumber(cert: X509): string {
  return cert.node.serialNumber.toLowerCase();
}
