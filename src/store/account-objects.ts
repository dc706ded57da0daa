import type { Keyring } from '../shared/secrets.ts';
import type { Db, Queryable } from './db.ts';

/** An object of one of the account families, as stored (account_objects). */
export interface AccountObjectRow {
  id: string;
  account_id: string;
  /** Its family's path, e.g. `credentials`. */
  kind: string;
  parent_id: string | null;
  /** The account id, or '' for a key unique across the service; null with no unique key. */
  unique_scope: string | null;
  unique_key: string | null;
  description: string;
  metadata: string;
  /** What the family shows beyond the common fields. */
  fields: Record<string, unknown>;
  /** A sealed private key or endpoint policy, or a token's hash; never shown but by its family. */
  secret: string | null;
  created_at: Date;
}

const COLUMNS = [
  'id',
  'account_id',
  'kind',
  'parent_id',
  'unique_scope',
  'unique_key',
  'description',
  'metadata',
  'fields',
  'secret',
  'created_at',
] as const;

/** Inserts an object (a unique-key clash is the store's unique violation). */
export async function insertObject(db: Queryable, row: AccountObjectRow): Promise<void> {
  const placeholders = COLUMNS.map((_, i) => `$${i + 1}`).join(', ');
  await db.query(
    `INSERT INTO account_objects (${COLUMNS.join(', ')}) VALUES (${placeholders})`,
    COLUMNS.map((column) => (column === 'fields' ? JSON.stringify(row.fields) : row[column])),
  );
}

/** One object of an account's `kind`; `forUpdate` locks it for the transaction. */
export async function getObject(
  db: Queryable,
  accountId: string,
  kind: string,
  id: string,
  forUpdate = false,
): Promise<AccountObjectRow | undefined> {
  const result = await db.query<AccountObjectRow>(
    `SELECT * FROM account_objects WHERE account_id = $1 AND kind = $2 AND id = $3${
      forUpdate ? ' FOR UPDATE' : ''
    }`,
    [accountId, kind, id],
  );
  return result.rows[0];
}

/** Writes an object's changeable columns back. */
export async function updateObject(db: Queryable, row: AccountObjectRow): Promise<void> {
  await db.query(
    `UPDATE account_objects SET description = $2, metadata = $3, fields = $4, secret = $5,
       unique_key = $6, unique_scope = $7, parent_id = $8
     WHERE id = $1`,
    [
      row.id,
      row.description,
      row.metadata,
      JSON.stringify(row.fields),
      row.secret,
      row.unique_key,
      row.unique_scope,
      row.parent_id,
    ],
  );
}

/** Deletes an object. */
export async function deleteObject(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM account_objects WHERE id = $1', [id]);
}

/** The object of `kind` holding a unique key (scope: an account id, or '' service-wide). */
export async function findByUnique(
  db: Queryable,
  kind: string,
  scope: string,
  key: string,
): Promise<AccountObjectRow | undefined> {
  const result = await db.query<AccountObjectRow>(
    'SELECT * FROM account_objects WHERE kind = $1 AND unique_scope = $2 AND unique_key = $3',
    [kind, scope, key],
  );
  return result.rows[0];
}

/** The objects belonging to `parentId` (an IP policy's rules), oldest first. */
export async function childObjects(db: Queryable, parentId: string): Promise<AccountObjectRow[]> {
  const result = await db.query<AccountObjectRow>(
    'SELECT * FROM account_objects WHERE parent_id = $1 ORDER BY id',
    [parentId],
  );
  return result.rows;
}

/** Every object of an account's `kind`, oldest first (for the families' own lookups). */
export async function objectsOfKind(
  db: Queryable,
  accountId: string,
  kind: string,
): Promise<AccountObjectRow[]> {
  const result = await db.query<AccountObjectRow>(
    'SELECT * FROM account_objects WHERE account_id = $1 AND kind = $2 ORDER BY id',
    [accountId, kind],
  );
  return result.rows;
}

/**
 * Seals the policies of endpoints stored in clear by earlier versions (in `fields`): each becomes
 * the endpoint's sealed secret. Run at start, before resealObjectSecrets; returns the rows changed.
 */
export async function sealEndpointPolicies(db: Db, keyring: Keyring): Promise<number> {
  const changed = await db.transaction(async (tx) => {
    const rows = await tx.query<{ id: string; policy: string }>(
      `SELECT id, fields->>'traffic_policy' AS policy FROM account_objects
        WHERE kind = 'endpoints' AND fields ? 'traffic_policy' ORDER BY id FOR UPDATE`,
    );
    for (const row of rows.rows) {
      await tx.query(
        `UPDATE account_objects SET secret = $2, fields = fields - 'traffic_policy' WHERE id = $1`,
        [row.id, keyring.seal(row.policy)],
      );
    }
    return rows.rows.length;
  });
  // The rows' earlier versions, which hold the policies in clear, leave the table's files.
  if (changed > 0) await db.query('VACUUM FULL account_objects');
  return changed;
}

/**
 * Seals again every account-object secret (a private key) not sealed with the keyring's current
 * key, as resealDestinationSecrets does for destinations. Run at start; returns the rows changed.
 */
export async function resealObjectSecrets(db: Db, keyring: Keyring): Promise<number> {
  const changed = await db.transaction(async (tx) => {
    const rows = await tx.query<{ id: string; secret: string }>(
      'SELECT id, secret FROM account_objects WHERE secret IS NOT NULL ORDER BY id FOR UPDATE',
    );
    const stale = rows.rows.filter((row) => keyring.stale(row.secret));
    for (const row of stale) {
      await tx.query('UPDATE account_objects SET secret = $2 WHERE id = $1', [
        row.id,
        keyring.seal(keyring.open(row.secret)),
      ]);
    }
    return stale.length;
  });
  if (changed > 0) await db.query('VACUUM FULL account_objects');
  return changed;
}
