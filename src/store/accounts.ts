import { newId } from '../shared/ids.ts';
import type { Queryable } from './db.ts';

/** Creates an account and returns its id. */
export async function createAccount(db: Queryable): Promise<string> {
  const id = newId('ac');
  await db.query('INSERT INTO accounts (id) VALUES ($1)', [id]);
  return id;
}

/** True when the account exists. */
export async function accountExists(db: Queryable, id: string): Promise<boolean> {
  return (await db.query('SELECT 1 FROM accounts WHERE id = $1', [id])).rows.length > 0;
}

/** True when the store holds no account yet (first start). */
export async function storeIsEmpty(db: Queryable): Promise<boolean> {
  return (await db.query('SELECT 1 FROM accounts LIMIT 1')).rows.length === 0;
}
