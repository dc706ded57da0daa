import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { string } from '../../../shared/ssh-keys/wire.ts';
import { ACL_FIELD } from '../credentials/resource.ts';
import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, str } from '../resources.ts';

/** The most bytes a pasted public key may have (a 16384-bit RSA key in PEM has ~2.8 kB). */
export const PUBLIC_KEY_MAX_BYTES = 16384;

/** The `public_key` a certificate request or SSH credential takes. */
export const PUBLIC_KEY_FIELD = {
  schema: { ...str, maxLength: PUBLIC_KEY_MAX_BYTES, 'x-max-utf8-bytes': PUBLIC_KEY_MAX_BYTES },
  text: { maxBytes: PUBLIC_KEY_MAX_BYTES },
  required: true,
  doc: 'SSH public key: authorized_keys line (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa of 2048+ bits) or PEM',
} as const;

// PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410).
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** A distinct, valid Ed25519 public key per tag, in authorized_keys format (for examples). */
export function exampleSshKey(tag: string): string {
  const seed = createHash('sha256').update(tag).digest();
  const key = createPrivateKey({
    key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]),
    format: 'der',
    type: 'pkcs8',
  });
  const x = Buffer.from(createPublicKey(key).export({ format: 'jwk' }).x!, 'base64url');
  const blob = Buffer.concat([string('ssh-ed25519'), string(x)]);
  return `ssh-ed25519 ${blob.toString('base64')} ${tag}`;
}

/** SSH public keys agents authenticate with (ngrok's `/ssh_credentials`). */
export const SSH_CREDENTIALS: Resource = {
  path: 'ssh_credentials',
  title: 'SSH credential',
  idPrefix: 'sshcr',
  listKey: 'ssh_credentials',
  audit: 'ssh_public_key',
  example: ({ tag }) => ({
    description: tag,
    public_key: exampleSshKey(tag),
    acl: [`bind:*.${tag}.example.org`],
  }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    public_key: {
      ...PUBLIC_KEY_FIELD,
      notUpdatable: 'create a new SSH credential',
      doc: `${PUBLIC_KEY_FIELD.doc}; its SHA256 fingerprint is unique across the service`,
    },
    acl: ACL_FIELD,
    owner_id: {
      schema: { type: ['string', 'null'] },
      serverAssigned: true,
      doc: 'always null: credentials belong to the account, not to a user',
    },
  },
};
