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

/** Writes a key's description and metadata. */
export async function updateApiKey(
  db: Queryable,
  row: Pick<ApiKeyRow, 'id' | 'description' | 'metadata'>,
): Promise<void> {
  await db.query('UPDATE api_keys SET description = $2, metadata = $3 WHERE id = $1', [
    row.id,
    row.description,
    row.metadata,
  ]);
}
