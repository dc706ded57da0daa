import { EXAMPLE_CERTIFICATE_PEM, EXAMPLE_PRIVATE_KEY_PEM } from '../../../shared/pki/examples.ts';
import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, object, str, strings } from '../resources.ts';

/** Most a chain may hold: ten certificates of a few KiB each. */
const MAX_CHAIN_PEM_BYTES = 64 * 1024;
/** Most a private key may hold: an RSA-16384 key is about 12.5 KiB of PEM. */
const MAX_KEY_PEM_BYTES = 16 * 1024;
const rfc3339 = { ...str, format: 'date-time' } as const;
const leafText = (doc: string) => ({ schema: str, serverAssigned: true, doc });
const bytes = (max: number) => ({ maxLength: max, 'x-max-utf8-bytes': max });

/** TLS certificates: a chain and the leaf's private key (write-only, sealed at rest). */
export const TLS_CERTIFICATES: Resource = {
  path: 'tls_certificates',
  title: 'TLS certificate',
  idPrefix: 'cert',
  listKey: 'tls_certificates',
  audit: 'tls_certificate',
  example: ({ tag }) => ({
    description: tag,
    certificate_pem: EXAMPLE_CERTIFICATE_PEM,
    private_key_pem: EXAMPLE_PRIVATE_KEY_PEM,
  }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    certificate_pem: {
      schema: { ...str, ...bytes(MAX_CHAIN_PEM_BYTES) },
      text: { maxBytes: MAX_CHAIN_PEM_BYTES },
      required: true,
      notUpdatable: 'upload the new certificate and point its domains at it',
      doc: 'the chain, PEM, leaf first, each certificate issued by the next',
    },
    private_key_pem: {
      schema: { ...str, ...bytes(MAX_KEY_PEM_BYTES), writeOnly: true },
      text: { maxBytes: MAX_KEY_PEM_BYTES },
      required: true,
      writeOnly: true,
      notUpdatable: 'upload the new certificate with its key',
      doc: "the leaf's unencrypted private key, PEM (RSA >= 2048, ECDSA P-256/384/521 or Ed25519); never shown",
    },
    subject_common_name: leafText("the leaf's subject common name"),
    subject_alternative_names: {
      schema: object({ dns_names: strings, ips: strings }, ['dns_names', 'ips']),
      serverAssigned: true,
      doc: "the leaf's DNS names (wildcards included) and IP addresses",
    },
    issued_at: {
      schema: { type: ['string', 'null'], format: 'date-time' },
      serverAssigned: true,
      doc: 'when the service issued it; null for an uploaded certificate',
    },
    not_before: { schema: rfc3339, serverAssigned: true, doc: "the leaf's validity start" },
    not_after: { schema: rfc3339, serverAssigned: true, doc: "the leaf's validity end" },
    key_usages: { schema: strings, serverAssigned: true, doc: "the leaf's keyUsage bits" },
    extended_key_usages: {
      schema: strings,
      serverAssigned: true,
      doc: "the leaf's extendedKeyUsage purposes; an unnamed one as its OID",
    },
    private_key_type: {
      schema: { enum: ['rsa', 'ecdsa', 'ed25519'] },
      serverAssigned: true,
      doc: 'rsa, ecdsa or ed25519',
    },
    issuer_common_name: leafText("the leaf's issuer common name"),
    serial_number: leafText("the leaf's serial number, lower-case hex"),
    subject_organization: leafText("the leaf's subject O"),
    subject_organizational_unit: leafText("the leaf's subject OU"),
    subject_locality: leafText("the leaf's subject L"),
    subject_province: leafText("the leaf's subject ST"),
    subject_country: leafText("the leaf's subject C"),
  },
};
