import { generateAuthority } from '../../../shared/ssh-keys/authorities.ts';
import type { Family } from '../objects/family.ts';
import { SSH_CERTIFICATE_AUTHORITIES } from './resource.ts';

/** A zero value some clients send for an option they do not set (Go's omitted fields). */
const unset = (value: unknown) => (value === '' || value === 0 ? undefined : value);

/**
 * SSH certificate authorities: the key pair is generated here; the public key is shown, the
 * private key (PKCS#8 PEM) is the object's secret, sealed by the layer and opened only to sign.
 * Deleting an authority does not revoke what it signed (OpenSSH has no such link): the
 * certificates keep its id, and servers stop trusting it when their config drops its key.
 */
export const SSH_CERTIFICATE_AUTHORITIES_FAMILY: Family = {
  resource: SSH_CERTIFICATE_AUTHORITIES,
  // An RSA 4096 key takes about a second: made before the transaction, not inside it.
  prepare: (body, mode) =>
    mode === 'update'
      ? undefined
      : generateAuthority({
          private_key_type: body.private_key_type,
          elliptic_curve: unset(body.elliptic_curve),
          key_size: unset(body.key_size),
        }),
  create(_body, ctx) {
    const authority = ctx.prepared as Awaited<ReturnType<typeof generateAuthority>>;
    return {
      fields: { public_key: authority.publicKey, key_type: authority.keyType },
      secret: authority.privateKeyPem,
    };
  },
};
