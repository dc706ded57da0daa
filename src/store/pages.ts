import type { Queryable } from './db.ts';

/** The resources with tables of their own; every other kind lives in account_objects. */
const OWN_TABLES = new Set([
  'api_keys',
  'agent_ingresses',
  'event_subscriptions',
  'event_destinations',
]);

/**
 * One page of an account's objects of `kind` (a resource's path), newest first. Ids sort by creation time, so `beforeId` is a
 * stable cursor. Fetches one row more than asked to know whether a next page exists.
 */
export async function selectPage<Row>(
  db: Queryable,
  kind: string,
  accountId: string,
  limit: number,
  beforeId: string | undefined,
): Promise<{ rows: Row[]; more: boolean }> {
  const own = OWN_TABLES.has(kind);
  const params: unknown[] = [accountId, limit + 1];
  let where = 'account_id = $1';
  if (!own) {
    params.push(kind);
    where += ` AND kind = $${params.length}`;
  }
  if (beforeId !== undefined) {
    params.push(beforeId);
    where += ` AND id < $${params.length}`;
  }
  const result = await db.query<Row>(
    `SELECT * FROM ${own ? kind : 'account_objects'} WHERE ${where} ORDER BY id DESC LIMIT $2`,
    params,
  );
  const more = result.rows.length > limit;
  return { rows: more ? result.rows.slice(0, limit) : result.rows, more };
}
