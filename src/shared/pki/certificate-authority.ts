import { AppError } from '../errors.ts';
import {
  certificatePem,
  extendedKeyUsages,
  isCertificateAuthority,
  keyUsages,
  NAME_ATTRIBUTES,
  nameAttribute,
  readCertificates,
  validity,
} from './x509.ts';

// A certificate authority of an account (ngrok's /certificate_authorities): one CA certificate
// that mutual TLS will verify client certificates against. It has no private key.

/** What a certificate authority shows, read from its `ca_pem` (the spec's table, in its order). */
export interface CertificateAuthorityFields {
  [field: string]: string | string[];
  ca_pem: string;
  subject_common_name: string;
  not_before: string;
  not_after: string;
  key_usages: string[];
  extended_key_usages: string[];
}

const FIELD = 'ca_pem';

/**
 * Reads `ca_pem`: exactly one certificate, which must be a CA (basicConstraints CA:TRUE and, when
 * keyUsage is present, keyCertSign). An expired CA is taken and shown as it is.
 */
export function readCertificateAuthority(caPem: string): CertificateAuthorityFields {
  const certificates = readCertificates(caPem, FIELD);
  if (certificates.length !== 1) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${FIELD}" must hold exactly one certificate, not ${certificates.length}; upload each authority on its own`,
      { field: FIELD },
    );
  }
  const [ca] = certificates;
  if (!isCertificateAuthority(ca)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${FIELD}" is not a certificate authority: its basicConstraints extension must say CA:TRUE`,
      { field: FIELD },
    );
  }
  const usages = keyUsages(ca);
  if (usages.length > 0 && !usages.includes('cert_sign')) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${FIELD}" is not a certificate authority: its keyUsage extension lacks keyCertSign`,
      { field: FIELD },
    );
  }
  return {
    ca_pem: certificatePem(ca),
    subject_common_name: nameAttribute(ca.asn.tbsCertificate.subject, NAME_ATTRIBUTES.common_name),
    ...validity(ca),
    key_usages: usages,
    extended_key_usages: extendedKeyUsages(ca),
  };
}
