import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, str } from '../resources.ts';

const notUpdatable = 'create another SSH certificate authority';

/** SSH certificate authorities: key pairs made by the service, their private keys sealed. */
export const SSH_CERTIFICATE_AUTHORITIES: Resource = {
  path: 'ssh_certificate_authorities',
  title: 'SSH certificate authority',
  idPrefix: 'sshca',
  listKey: 'ssh_certificate_authorities',
  audit: 'ssh_certificate_authority',
  example: ({ tag }) => ({ description: tag, private_key_type: 'ed25519' }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    private_key_type: {
      schema: { enum: ['ed25519', 'ecdsa', 'rsa'] },
      writeOnly: true,
      notUpdatable,
      doc: 'the key pair to generate: ed25519 (default), ecdsa or rsa',
    },
    elliptic_curve: {
      schema: { type: ['string', 'null'], description: 'p256 (default), p384 or p521' },
      writeOnly: true,
      notUpdatable,
      doc: 'the curve of an ecdsa key: p256 (default), p384 or p521',
    },
    key_size: {
      schema: { type: ['integer', 'null'], description: '2048 or 4096 (default)' },
      writeOnly: true,
      notUpdatable,
      doc: 'the modulus size of an rsa key: 2048 or 4096 (default)',
    },
    public_key: {
      schema: str,
      serverAssigned: true,
      doc: 'the public key in authorized_keys format (for TrustedUserCAKeys or @cert-authority)',
    },
    key_type: {
      schema: str,
      serverAssigned: true,
      doc: 'ed25519, ecdsa or rsa; the private key never leaves the service',
    },
  },
};
