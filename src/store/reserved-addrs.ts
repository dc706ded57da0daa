import type { Queryable } from './db.ts';

// Reserved TCP addresses are account objects (kind reserved_addrs) whose service-wide unique key
// is their `host:port`.

/** The ports of `host` reserved by any account. */
export async function takenPorts(db: Queryable, host: string): Promise<number[]> {
  const result = await db.query<{ unique_key: string }>(
    `SELECT unique_key FROM account_objects
      WHERE kind = 'reserved_addrs' AND unique_scope = '' AND starts_with(unique_key, $1)`,
    [`${host}:`],
  );
  return result.rows.map((row) => Number(row.unique_key.slice(host.length + 1)));
}

/** The ports of `host` that live sessions hold (reserved or assigned for a session). */
export async function heldPorts(db: Queryable, host: string): Promise<number[]> {
  const result = await db.query<{ endpoint: string }>(
    `SELECT endpoint FROM agent_sessions WHERE lease_until > now() AND starts_with(endpoint, $1)`,
    [`${host}:`],
  );
  return result.rows.map((row) => Number(row.endpoint.slice(host.length + 1)));
}
