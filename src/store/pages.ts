import type { Queryable } from './db.ts';

/** The tables whose rows are listed page by page, newest first. */
export type PagedTable =
  | 'api_keys'
  | 'agent_ingresses'
  | 'event_subscriptions'
  | 'event_destinations';

/**
 * One page of an account's rows, newest first. Ids sort by creation time, so `beforeId` is a
 * stable cursor. Fetches one row more than asked to know whether a next page exists.
 */
export async function selectPage<Row>(
  db: Queryable,
  table: PagedTable,
  accountId: string,
  limit: number,
  beforeId: string | undefined,
): Promise<{ rows: Row[]; more: boolean }> {
  const params: unknown[] = [accountId, limit + 1];
  let where = 'account_id = $1';
  if (beforeId !== undefined) {
    params.push(beforeId);
    where += ' AND id < $3';
  }
  const result = await db.query<Row>(
    `SELECT * FROM ${table} WHERE ${where} ORDER BY id DESC LIMIT $2`,
    params,
  );
  const more = result.rows.length > limit;
  return { rows: more ? result.rows.slice(0, limit) : result.rows, more };
}
