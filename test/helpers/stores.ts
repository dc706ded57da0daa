import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { seedTestStore } from './store-template.ts';

/** Where a test's store lives: the env variables that point the service at it, and cleanup. */
export interface TestStore {
  kind: 'pglite' | 'postgres';
  env: { DATA_DIR: string; DATABASE_URL?: string; SECRETS_KEY?: string };
  cleanup(): Promise<void>;
}

/** The machine's PostgreSQL (trust auth); POSTGRES_URL overrides it. */
export const POSTGRES_ADMIN_URL =
  process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh data dir for the embedded PGlite store: a new, migrated store (store-template.ts). */
export async function pgliteStore(): Promise<TestStore> {
  const dir = mkdtempSync(join(tmpdir(), 'agin-pglite-'));
  seedTestStore(dir);
  return {
    kind: 'pglite',
    env: { DATA_DIR: dir },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * A fresh database on the machine's PostgreSQL, dropped at cleanup, with its own SECRETS_KEY (a
 * shared store needs one: docs/decisions.md#shared-secrets-key).
 */
export async function postgresStore(): Promise<TestStore> {
  const name = `agin_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  const dir = mkdtempSync(join(tmpdir(), 'agin-pg-'));
  return {
    kind: 'postgres',
    env: {
      DATA_DIR: dir,
      DATABASE_URL: url.toString(),
      SECRETS_KEY: randomBytes(32).toString('base64'),
    },
    async cleanup() {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Both stores, for `describe.each`: every store-backed suite runs on each. */
export const STORES = [
  { kind: 'pglite', open: pgliteStore },
  { kind: 'postgres', open: postgresStore },
] as const;
