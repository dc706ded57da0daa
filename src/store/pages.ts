import type { Queryable } from './db.ts';

/** The resources with tables of their own; every other kind lives in account_objects. */
export type OwnTable =
  | 'api_keys'
  | 'agent_ingresses'
  | 'event_subscriptions'
  | 'event_destinations';

/** Where a resource's objects are: a table of its own, or its kind of account_objects. */
export type ObjectsAt = { table: OwnTable } | { kind: string };

/** The table and condition of `at`'s objects of an account ($1), with `params` to extend. */
function scope(at: ObjectsAt, params: unknown[]): { table: string; where: string } {
  if ('table' in at) return { table: at.table, where: 'account_id = $1' };
  params.push(at.kind);
  return { table: 'account_objects', where: `account_id = $1 AND kind = $${params.length}` };
}

/**
 * One page of an account's objects, newest first. Ids sort by creation time, so `beforeId` is a
 * stable cursor. Fetches one row more than asked to know whether a next page exists.
 */
export async function selectPage<Row>(
  db: Queryable,
  at: ObjectsAt,
  accountId: string,
  limit: number,
  beforeId: string | undefined,
): Promise<{ rows: Row[]; more: boolean }> {
  const params: unknown[] = [accountId, limit + 1];
  const { table, where } = scope(at, params);
  let condition = where;
  if (beforeId !== undefined) {
    params.push(beforeId);
    condition += ` AND id < $${params.length}`;
  }
  const result = await db.query<Row>(
    `SELECT * FROM ${table} WHERE ${condition} ORDER BY id DESC LIMIT $2`,
    params,
  );
  const more = result.rows.length > limit;
  return { rows: more ? result.rows.slice(0, limit) : result.rows, more };
}

/** One object of an account in a table of its own; `lock` holds it until the transaction ends. */
export async function selectOwn<Row>(
  db: Queryable,
  table: OwnTable,
  accountId: string,
  id: string,
  lock: boolean,
): Promise<Row | undefined> {
  const result = await db.query<Row>(
    `SELECT * FROM ${table} WHERE account_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`,
    [accountId, id],
  );
  return result.rows[0];
}

/** Deletes one object of a table of its own (what refers to it goes by the table's cascades). */
export async function deleteOwn(db: Queryable, table: OwnTable, id: string): Promise<void> {
  await db.query(`DELETE FROM ${table} WHERE id = $1`, [id]);
}
