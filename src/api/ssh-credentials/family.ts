import { parseAcl } from '../../auth/acl.ts';
import { parsePublicKey } from '../../ssh/public-keys.ts';
import type { Family } from '../objects/family.ts';
import { SSH_CREDENTIALS } from './resource.ts';

/**
 * SSH credentials: a public key, parsed and checked, kept as given and found by its SHA256
 * fingerprint (the unique key: the agent listener looks a presented key up by it), and an acl.
 */
export const SSH_CREDENTIALS_FAMILY: Family = {
  resource: SSH_CREDENTIALS,
  create(body) {
    const text = (body.public_key as string).trim();
    const key = parsePublicKey(text);
    return {
      fields: {
        public_key: text,
        acl: parseAcl((body.acl as string[] | undefined) ?? []),
        owner_id: null,
      },
      unique: { key: key.fingerprint, scope: 'account', field: 'public_key' },
    };
  },
  update(_current, body) {
    return body.acl === undefined ? {} : { fields: { acl: parseAcl(body.acl as string[]) } };
  },
};
