import type { Family } from '../objects/family.ts';
import { CERTIFICATE_AUTHORITIES } from './resource.ts';

/**
 * Certificate authorities: the fields are read from the uploaded CA certificate (src/shared/pki/), loaded
 * on first use so that a start does not pay for the ASN.1 library.
 */
export const CERTIFICATE_AUTHORITIES_FAMILY: Family = {
  resource: CERTIFICATE_AUTHORITIES,
  async create(body) {
    const { readCertificateAuthority } = await import(
      '../../../shared/pki/certificate-authority.ts'
    );
    return { fields: readCertificateAuthority(body.ca_pem as string) };
  },
};
