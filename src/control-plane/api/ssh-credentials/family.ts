import { parseAcl } from '../../../agent-plane/sessions/acl.ts';
import { AppError } from '../../../shared/errors.ts';
import { parsePublicKey } from '../../../shared/ssh-keys/public-keys.ts';
import type { Family, FamilyContext } from '../objects/family.ts';
import { SSH_CREDENTIALS } from './resource.ts';

/**
 * Refuses a key already registered (docs/decisions.md#ssh-keys): in this account, or in another,
 * without saying which, since a key in two accounts could log in to neither. Rows stored before
 * keys were unique across the service keep their account's scope, so they are looked up by key
 * whatever their scope; new rows are unique across the service, which settles two creates at once.
 */
async function checkKeyFree(ctx: FamilyContext, fingerprint: string): Promise<void> {
  const held = await ctx.tx.query<{ account_id: string }>(
    `SELECT account_id FROM account_objects WHERE kind = 'ssh_credentials' AND unique_key = $1`,
    [fingerprint],
  );
  if (held.rows.length === 0) return;
  const elsewhere = held.rows.every((row) => row.account_id !== ctx.accountId);
  throw new AppError(
    'ERR_ALREADY_EXISTS',
    elsewhere
      ? 'this "public_key" is registered in another account: remove it there, or make a new key pair (ssh-keygen)'
      : 'this "public_key" is already in use',
    { field: 'public_key' },
  );
}

/**
 * SSH credentials: a public key, parsed and checked, kept as given and found by its SHA256
 * fingerprint (the unique key across the service: the agent listener looks a presented key up
 * by it), and an acl.
 */
export const SSH_CREDENTIALS_FAMILY: Family = {
  resource: SSH_CREDENTIALS,
  async create(body, ctx) {
    const text = (body.public_key as string).trim();
    const key = parsePublicKey(text);
    await checkKeyFree(ctx, key.fingerprint);
    return {
      fields: {
        public_key: text,
        acl: parseAcl((body.acl as string[] | undefined) ?? []),
        owner_id: null,
      },
      unique: { key: key.fingerprint, scope: 'service', field: 'public_key' },
    };
  },
  update(_current, body) {
    return body.acl === undefined ? {} : { fields: { acl: parseAcl(body.acl as string[]) } };
  },
};
