import type { Queryable } from './db.ts';

/** An API key as stored: never the token, only its hash. */
export interface ApiKeyRow {
  id: string;
  account_id: string;
  description: string;
  metadata: string;
  token_hash: Uint8Array;
  created_at: Date;
}

/** Inserts a key row. */
export async function insertApiKey(db: Queryable, row: ApiKeyRow): Promise<ApiKeyRow> {
  await db.query(
    `INSERT INTO api_keys (id, account_id, description, metadata, token_hash, created_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [row.id, row.account_id, row.description, row.metadata, row.token_hash, row.created_at],
  );
  return row;
}

/** The key whose token hashes to `tokenHash`, if any. */
export async function findApiKeyByHash(
  db: Queryable,
  tokenHash: Uint8Array,
): Promise<ApiKeyRow | undefined> {
  const result = await db.query<ApiKeyRow>('SELECT * FROM api_keys WHERE token_hash = $1', [
    tokenHash,
  ]);
  return result.rows[0];
}

/** One key of an account. */
export async function getApiKey(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<ApiKeyRow | undefined> {
  const result = await db.query<ApiKeyRow>(
    'SELECT * FROM api_keys WHERE account_id = $1 AND id = $2',
    [accountId, id],
  );
  return result.rows[0];
}

/** Applies a partial update and returns the new row. */
export async function updateApiKey(
  db: Queryable,
  accountId: string,
  id: string,
  changes: { description?: string; metadata?: string },
): Promise<ApiKeyRow | undefined> {
  const result = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET description = COALESCE($3, description), metadata = COALESCE($4, metadata)
     WHERE account_id = $1 AND id = $2 RETURNING *`,
    [accountId, id, changes.description ?? null, changes.metadata ?? null],
  );
  return result.rows[0];
}

/** Deletes a key and returns the row it was. */
export async function deleteApiKey(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<ApiKeyRow | undefined> {
  const result = await db.query<ApiKeyRow>(
    'DELETE FROM api_keys WHERE account_id = $1 AND id = $2 RETURNING *',
    [accountId, id],
  );
  return result.rows[0];
}
