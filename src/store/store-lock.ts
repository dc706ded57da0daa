import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

// PGlite has no lock of its own: two processes on one data directory each keep their own copy of
// the database in memory and overwrite each other's writes (or corrupt the files). So the
// embedded store holds a lock file for as long as it is open, naming its process. The file is
// made complete under a temporary name and hard-linked into place (atomic, fails if it exists).
// A lock whose process is gone (a crash, SIGKILL) is stale and taken over; a process is the
// lock's owner only if it also started when the lock says (Linux), so a recycled pid does not
// keep the store locked.

/** The embedded store is open in another process (or already in this one). */
export class StoreInUseError extends Error {
  override name = 'StoreInUseError';
  constructor(storeDir: string, pid: number) {
    super(
      `the embedded store under ${storeDir} is in use by process ${pid} (a running service?); ` +
        'stop it first, or use DATABASE_URL',
    );
  }
}

/** A held lock; release() removes it (once). */
export interface StoreLock {
  release(): void;
}

interface Owner {
  pid: number;
  /** The process's start time (clock ticks after boot, /proc/PID/stat), where known. */
  started: string | undefined;
}

const held = new Set<string>();

/** When `pid` started, from /proc (Linux); undefined elsewhere or when it is gone. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is 3rd, starttime 22nd.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function isAlive(owner: Owner): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return owner.started === undefined || owner.started === startTime(owner.pid);
}

function readOwner(file: string): Owner | undefined {
  try {
    const [pid, started] = readFileSync(file, 'utf8').trim().split(' ');
    return { pid: Number(pid), started: started || undefined };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Whether the lock `file` names a process holding it (not this one, unless this one does). */
function inUse(file: string, owner: Owner): boolean {
  if (owner.pid === process.pid) return held.has(file);
  return Number.isInteger(owner.pid) && owner.pid > 0 && isAlive(owner);
}

/**
 * Takes the lock file `file` for the store in `storeDir`, or throws StoreInUseError naming the
 * process that holds it. A stale lock is moved aside and checked before it is removed, so two
 * processes taking over the same stale lock cannot both win.
 */
export function lockStore(file: string, storeDir: string): StoreLock {
  const mine = `${process.pid} ${startTime(process.pid) ?? ''}\n`;
  const staged = `${file}.${process.pid}`;
  for (;;) {
    writeFileSync(staged, mine);
    try {
      linkSync(staged, file);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(staged, { force: true });
    }
    const owner = readOwner(file);
    if (owner === undefined) continue; // released meanwhile
    if (inUse(file, owner)) throw new StoreInUseError(storeDir, owner.pid);
    takeOver(file, staged, owner, storeDir);
  }
  held.add(file);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      held.delete(file);
      if (readOwner(file)?.pid === process.pid) rmSync(file, { force: true });
    },
  };
}

// Moves a stale lock aside; if what was moved is not that stale lock (another process took it
// over in between), puts it back and reports it in use.
function takeOver(file: string, aside: string, stale: Owner, storeDir: string): void {
  try {
    renameSync(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const moved = readOwner(aside);
  if (moved !== undefined && (moved.pid !== stale.pid || moved.started !== stale.started)) {
    try {
      linkSync(aside, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(aside, { force: true });
    }
    throw new StoreInUseError(storeDir, moved.pid);
  }
  rmSync(aside, { force: true });
}
