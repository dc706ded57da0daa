import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, isUniqueViolation, openPglite } from '../../src/store/db.ts';

// The embedded store in its own process (src/store/store-process.ts): the same answers as
// PGlite in this process, and no process left behind however the service ends.

/** The pids of `pid`'s child processes (Linux). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(' ').map(Number);
}

const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(25);
  if (!check()) throw new Error(`timed out waiting until ${what}`);
}

describe('the embedded store process', () => {
  let dir: string;
  let db: Db;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agin-store-process-'));
    db = await openPglite(dir);
    await db.query('CREATE TABLE things (id int PRIMARY KEY, at timestamptz, bytes bytea)');
  });
  afterAll(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs PGlite in a child process, compiled by Liftoff only', () => {
    const [store] = childrenOf(process.pid).filter((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('store-process-main.ts'),
    );
    expect(store).toBeGreaterThan(0);
    expect(readFileSync(`/proc/${store}/cmdline`, 'utf8').split('\0')).toContain('--liftoff-only');
    expect(db.wasmMemoryBytes()).toBeGreaterThanOrEqual(128 * 2 ** 20);
  });

  it('answers queries with dates and bytes as they went in', async () => {
    const at = new Date('2026-11-27T12:34:56.789Z');
    await db.query('INSERT INTO things VALUES ($1, $2, $3)', [1, at, new Uint8Array([0, 1, 255])]);
    const { rows } = await db.query<{ at: Date; bytes: Uint8Array }>(
      'SELECT at, bytes FROM things WHERE id = 1',
    );
    expect(rows[0]!.at).toEqual(at);
    expect([...rows[0]!.bytes]).toEqual([0, 1, 255]);
  });

  it('keeps PostgreSQL error fields: a unique violation is still one', async () => {
    const error = await db.query('INSERT INTO things (id) VALUES (1)').catch((e: unknown) => e);
    expect(isUniqueViolation(error)).toBe(true);
    expect(error).toMatchObject({ constraint: 'things_pkey' });
    expect((error as Error).message).toMatch(/duplicate key value violates unique constraint/);
  });

  it('commits a transaction, and rolls back one whose work throws', async () => {
    const value = await db.transaction(async (tx) => {
      await tx.query('INSERT INTO things (id) VALUES (2)');
      return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM things')).rows[0]!.n;
    });
    expect(value).toBe(2);
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO things (id) VALUES (3)');
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO things (id) VALUES (4)');
        await tx.query('INSERT INTO things (id) VALUES (4)');
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const { rows } = await db.query<{ id: number }>('SELECT id FROM things ORDER BY id');
    expect(rows.map((row) => row.id)).toEqual([1, 2]);
  });

  it('runs transactions one at a time, as PGlite does, queries waiting their turn', async () => {
    const order: string[] = [];
    await Promise.all([
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO things (id) VALUES (10)');
        await sleep(50);
        order.push('first');
      }),
      db.transaction(async (tx) => {
        const { rows } = await tx.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM things WHERE id = 10',
        );
        order.push(`second saw ${rows[0]!.n}`);
      }),
    ]);
    expect(order).toEqual(['first', 'second saw 1']);
  });
});

describe('the store process and the service process', () => {
  it('ends with its service even when the service is killed, and the store opens again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agin-store-orphan-'));
    try {
      const script = `
        const { openPglite } = await import(${JSON.stringify(join(import.meta.dirname, '../../src/store/db.ts'))});
        const db = await openPglite(${JSON.stringify(dir)});
        await db.query('CREATE TABLE kept (id int)');
        await db.query('INSERT INTO kept VALUES (7)');
        console.log('open');
        setInterval(() => {}, 1000);`;
      const service = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve) => service.stdout.once('data', () => resolve()));
      const [store] = childrenOf(service.pid!);
      expect(store).toBeGreaterThan(0);
      service.kill('SIGKILL');
      await until(() => !alive(store!), 'the store process ends');
      const again = await openPglite(dir);
      expect((await again.query('SELECT id FROM kept')).rows).toEqual([{ id: 7 }]);
      await again.close();
      expect(existsSync(join(dir, 'store.lock'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says so when the store process is gone, rather than waiting forever', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agin-store-gone-'));
    const db = await openPglite(dir);
    try {
      const [store] = childrenOf(process.pid).filter((pid) =>
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir),
      );
      process.kill(store!, 'SIGKILL');
      await until(() => !alive(store!), 'the store process ends');
      await expect(db.query('SELECT 1')).rejects.toThrow(
        "the embedded store's process ended (SIGKILL)",
      );
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
