import { newId } from '../../../shared/ids.ts';
import { authoritySigner } from '../../../shared/ssh-keys/authorities.ts';
import {
  type CertificateKind,
  formatTime,
  readCriticalOptions,
  readExtensions,
  readPrincipals,
  readValidity,
  signCertificate,
} from '../../../shared/ssh-keys/certificates.ts';
import { parsePublicKey } from '../../../shared/ssh-keys/public-keys.ts';
import type { Family, FamilyContext } from '../objects/family.ts';
import type { JsonObject, Resource } from '../resource-types.ts';
import { notFound } from '../resources.ts';
import { SSH_CERTIFICATE_AUTHORITIES } from '../ssh-certificate-authorities/resource.ts';
import { SSH_HOST_CERTIFICATES, SSH_USER_CERTIFICATES } from './resource.ts';

/** The signer of the caller's authority `id` (another account's, or none: 404). */
async function signerOf(ctx: FamilyContext, id: string) {
  const authority = await ctx.find(SSH_CERTIFICATE_AUTHORITIES.path, id);
  const privateKey = authority === undefined ? undefined : ctx.openSecret(authority);
  if (privateKey === undefined) throw notFound(SSH_CERTIFICATE_AUTHORITIES, id);
  return authoritySigner(privateKey);
}

/**
 * Signs the request's public key into an OpenSSH certificate whose key id is the object's id
 * (sshd logs it on every login), and stores what it says. Nothing of a certificate changes
 * after signing but its description and metadata.
 */
function certificateFamily(resource: Resource, kind: CertificateKind): Family {
  return {
    resource,
    async create(body: JsonObject, ctx) {
      const caId = body.ssh_certificate_authority_id as string;
      const signer = await signerOf(ctx, caId);
      const text = (body.public_key as string).trim();
      const subject = parsePublicKey(text);
      const id = newId(resource.idPrefix);
      const { validAfter, validUntil } = readValidity(body, kind);
      const principals = readPrincipals(body.principals);
      const user = kind === 'user';
      const criticalOptions = user ? readCriticalOptions(body.critical_options) : {};
      const extensions = user ? readExtensions(body.extensions) : {};
      const certificate = signCertificate(
        {
          kind,
          subject,
          keyId: id,
          principals,
          validAfter,
          validUntil,
          criticalOptions,
          extensions,
        },
        signer,
      );
      return {
        id,
        fields: {
          public_key: text,
          key_type: subject.type,
          ssh_certificate_authority_id: caId,
          principals,
          ...(user ? { critical_options: criticalOptions, extensions } : {}),
          valid_after: formatTime(validAfter),
          valid_until: formatTime(validUntil),
          certificate,
        },
      };
    },
  };
}

/** SSH host certificates (no critical options or extensions: OpenSSH defines none for hosts). */
export const SSH_HOST_CERTIFICATES_FAMILY = certificateFamily(SSH_HOST_CERTIFICATES, 'host');
/** SSH user certificates. */
export const SSH_USER_CERTIFICATES_FAMILY = certificateFamily(SSH_USER_CERTIFICATES, 'user');
