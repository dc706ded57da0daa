import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/store/db.ts';
import { lockStore, StoreInUseError } from '../../src/store/store-lock.ts';

/** A pid no process has: one that just exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid!;
}

/** What /proc says of a process's start, as the lock records it. */
function startOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

describe('the embedded store lock', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agin-lock-'));
    file = join(dir, 'store.lock');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is held by one opener at a time, in this process too, and released by close', async () => {
    const db = await openPglite(dir);
    expect(readFileSync(file, 'utf8')).toMatch(new RegExp(`^${process.pid} `));
    await expect(openPglite(dir)).rejects.toThrow(
      `the embedded store under ${join(dir, 'store')} is in use by process ${process.pid} (a running service?); stop it first, or use DATABASE_URL`,
    );
    await db.close();
    expect(existsSync(file)).toBe(false);
    const again = await openPglite(dir);
    await again.close();
  });

  it('refuses while a live process holds it', () => {
    writeFileSync(file, `${process.ppid} ${startOf(process.ppid)}\n`);
    expect(() => lockStore(file, dir)).toThrow(StoreInUseError);
    expect(() => lockStore(file, dir)).toThrow(`in use by process ${process.ppid}`);
    expect(readFileSync(file, 'utf8')).toBe(`${process.ppid} ${startOf(process.ppid)}\n`);
  });

  it.each([
    ['a process that is gone', () => `${deadPid()} 12345\n`],
    ['a recycled pid (a live process that started later)', () => `${process.ppid} 1\n`],
    [
      'this process, which does not hold it (a container restarted as pid 1)',
      () => `${process.pid} 1\n`,
    ],
    ['nothing readable', () => ''],
  ])('takes over a stale lock naming %s', (_what, content) => {
    writeFileSync(file, content());
    const lock = lockStore(file, dir);
    expect(readFileSync(file, 'utf8')).toBe(`${process.pid} ${startOf(process.pid)}\n`);
    lock.release();
    expect(existsSync(file)).toBe(false);
  });
});
