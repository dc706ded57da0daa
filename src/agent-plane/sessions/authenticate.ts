import ssh2 from 'ssh2';
import { fingerprint } from '../../shared/ssh-keys/public-keys.ts';
import { hashToken } from '../../shared/tokens.ts';
import { type AccountObjectRow, findByUnique } from '../../store/account-objects.ts';
import type { Queryable } from '../../store/db.ts';

// Who an agent is: the tunnel credential whose authtoken it presents (as the SSH user name or
// the password), or the SSH credential whose public key signs its login. Either way the agent
// acts for that credential's account, within that credential's acl.

/** An authenticated agent's credential. */
export interface AgentCredential {
  accountId: string;
  id: string;
  /** Its family's path: `credentials` or `ssh_credentials` (its URI is under it). */
  kind: 'credentials' | 'ssh_credentials';
  acl: string[];
}

function credentialOf(row: AccountObjectRow): AgentCredential {
  return {
    accountId: row.account_id,
    id: row.id,
    kind: row.kind as AgentCredential['kind'],
    acl: (row.fields.acl as string[] | undefined) ?? [],
  };
}

/** The tunnel credential of an authtoken (its SHA-256 is the credential's unique key). */
export async function credentialOfToken(
  db: Queryable,
  token: string,
): Promise<AgentCredential | undefined> {
  if (token === '' || token.length > 512) return undefined;
  const row = await findByUnique(db, 'credentials', '', hashToken(token).toString('base64url'));
  return row === undefined ? undefined : credentialOf(row);
}

/**
 * The SSH credential registered with this public key. A fingerprint is unique across the service
 * (`/ssh_credentials` refuses a key another account holds); a key two accounts registered before
 * that was so is ambiguous and refused.
 */
export async function credentialOfKey(
  db: Queryable,
  keyBlob: Buffer,
): Promise<AgentCredential | undefined> {
  const rows = await db.query<AccountObjectRow>(
    `SELECT * FROM account_objects WHERE kind = 'ssh_credentials' AND unique_key = $1 LIMIT 2`,
    [fingerprint(keyBlob)],
  );
  return rows.rows.length === 1 ? credentialOf(rows.rows[0]) : undefined;
}

/** True when `signature` over `blob` was made by the private half of the presented key. */
export function signatureValid(
  key: { algo: string; data: Buffer },
  blob: Buffer,
  signature: Buffer,
  hashAlgo: string | undefined,
): boolean {
  const parsed = ssh2.utils.parseKey(`${key.algo} ${key.data.toString('base64')}`);
  if (parsed instanceof Error) return false;
  const one = Array.isArray(parsed) ? parsed[0] : parsed;
  return one.verify(blob, signature, hashAlgo as never) === true;
}
