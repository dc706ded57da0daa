import type { Field, Resource } from '../resource-types.ts';
import { COMMON, describedBy, str, strings } from '../resources.ts';
import { exampleSshKey, PUBLIC_KEY_FIELD } from '../ssh-credentials/resource.ts';

const time = { type: ['string', 'null'], description: 'RFC 3339' };
const map = { type: 'object', additionalProperties: str } as const;
const notUpdatable = 'sign a new certificate';

/** The fields host and user certificates share; `principals` says what the principals are. */
function certificateFields(principals: string): Record<string, Field> {
  return {
    ...COMMON,
    ...describedBy('maxBytes'),
    public_key: { ...PUBLIC_KEY_FIELD, notUpdatable, doc: 'the public key the certificate signs' },
    key_type: {
      schema: str,
      serverAssigned: true,
      doc: 'rsa, ecdsa or ed25519: the type of public_key',
    },
    ssh_certificate_authority_id: {
      schema: str,
      required: true,
      notUpdatable,
      doc: 'the SSH certificate authority of the account that signs it',
    },
    principals: { schema: strings, notUpdatable, doc: principals },
  };
}

/** Validity fields; `lifetime` says the default. */
function validityFields(lifetime: string): Record<string, Field> {
  return {
    valid_after: { schema: time, notUpdatable, doc: 'validity start, whole seconds; default: now' },
    valid_until: {
      schema: time,
      notUpdatable,
      doc: `validity end (OpenSSH's valid_before), whole seconds; default: ${lifetime} after valid_after`,
    },
    certificate: {
      schema: str,
      serverAssigned: true,
      doc: 'the OpenSSH certificate in authorized_keys format (a -cert.pub file); its key id is the object id',
    },
  };
}

const example = ({ tag, idOf }: { tag: string; idOf: (path: string) => string }) => ({
  description: tag,
  ssh_certificate_authority_id: idOf('ssh_certificate_authorities'),
  public_key: exampleSshKey(tag),
  principals: [`${tag}.example.org`],
});

/** SSH host certificates: a server's key signed for the names it serves. */
export const SSH_HOST_CERTIFICATES: Resource = {
  path: 'ssh_host_certificates',
  title: 'SSH host certificate',
  idPrefix: 'shcrt',
  listKey: 'ssh_host_certificates',
  audit: 'ssh_host_certificate',
  example,
  fields: {
    ...certificateFields('host names and IPs it may serve; empty: any host (dangerous)'),
    ...validityFields('one year'),
  },
};

/** SSH user certificates: a person's key signed for the users they may log in as. */
export const SSH_USER_CERTIFICATES: Resource = {
  path: 'ssh_user_certificates',
  title: 'SSH user certificate',
  idPrefix: 'sucrt',
  listKey: 'ssh_user_certificates',
  audit: 'ssh_user_certificate',
  example,
  fields: {
    ...certificateFields('user names it may log in as; empty: any user (dangerous)'),
    critical_options: {
      schema: map,
      notUpdatable,
      doc: 'force-command and/or source-address (comma-separated CIDRs), as OpenSSH defines them',
    },
    extensions: {
      schema: map,
      notUpdatable,
      doc: 'OpenSSH extensions, e.g. permit-port-forwarding; default: permit-pty and permit-user-rc',
    },
    ...validityFields('24 hours'),
  },
};
