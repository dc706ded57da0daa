import { EXAMPLE_CA_PEM } from '../../../shared/pki/examples.ts';
import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, str, strings } from '../resources.ts';

/** Most a `ca_pem` may hold: one certificate is a few KiB even with an RSA-8192 key. */
const MAX_CA_PEM_BYTES = 16 * 1024;
const rfc3339 = { ...str, format: 'date-time' } as const;

/** Certificate authorities: CA certificates that mutual TLS verifies client certificates with. */
export const CERTIFICATE_AUTHORITIES: Resource = {
  path: 'certificate_authorities',
  title: 'certificate authority',
  idPrefix: 'ca',
  listKey: 'certificate_authorities',
  audit: 'certificate_authority',
  example: ({ tag }) => ({ description: tag, ca_pem: EXAMPLE_CA_PEM }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    ca_pem: {
      schema: { ...str, maxLength: MAX_CA_PEM_BYTES, 'x-max-utf8-bytes': MAX_CA_PEM_BYTES },
      text: { maxBytes: MAX_CA_PEM_BYTES },
      required: true,
      notUpdatable: 'upload the new authority and delete this one',
      doc: 'the CA certificate, PEM (basicConstraints CA:TRUE)',
    },
    subject_common_name: { schema: str, serverAssigned: true, doc: 'subject common name' },
    not_before: { schema: rfc3339, serverAssigned: true, doc: 'validity start' },
    not_after: { schema: rfc3339, serverAssigned: true, doc: 'validity end' },
    key_usages: {
      schema: strings,
      serverAssigned: true,
      doc: 'keyUsage bits, e.g. cert_sign, crl_sign',
    },
    extended_key_usages: {
      schema: strings,
      serverAssigned: true,
      doc: 'extendedKeyUsage purposes, e.g. client_auth; an unnamed one as its OID',
    },
  },
};
