import { parseAcl } from '../../../agent-plane/sessions/acl.ts';
import { hashToken, newToken } from '../../../shared/tokens.ts';
import type { Family } from '../objects/family.ts';
import { CREDENTIALS } from './resource.ts';

/**
 * Tunnel credentials: an authtoken shown once and kept as its SHA-256 (the unique key, so the
 * agent listener finds a credential by the hash of what an agent presents), and an acl.
 */
export const CREDENTIALS_FAMILY: Family = {
  resource: CREDENTIALS,
  create(body) {
    const token = newToken('cr');
    return {
      fields: { acl: parseAcl((body.acl as string[] | undefined) ?? []), owner_id: null },
      unique: { key: hashToken(token).toString('base64url'), scope: 'service', field: 'token' },
      shownOnce: { token },
    };
  },
  update(_current, body) {
    return body.acl === undefined ? {} : { fields: { acl: parseAcl(body.acl as string[]) } };
  },
};
