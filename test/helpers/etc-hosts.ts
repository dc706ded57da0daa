import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';

// ngrok's SDK resolves the host of its server_addr itself (no resolver of ours to point at the
// service), and its TLS name must be that host: the tests map the names they dial to 127.0.0.1
// in /etc/hosts (the test runner is root, as in CI) and remove exactly their lines after. Test
// files run in parallel and their SDKs resolve at any moment, so no line may ever be missing:
// a mapping is appended, a removal replaces the file whole (a renamed copy; written in place
// where /etc/hosts cannot be replaced, e.g. a bind mount), and both hold a lock file so that a
// removal never drops a line appended meanwhile.

const HOSTS = '/etc/hosts';
const LOCK = `${HOSTS}.agent-ingress-tests.lock`;
const TAG = '# agent-ingress test';

/** Whether process `pid` lives. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs `change` holding the lock (taken over from a test process that died holding it). */
function locked(change: () => void): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let tries = 0; ; tries++) {
    try {
      writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(LOCK, 'utf8') || '0');
      if (holder > 0 && !alive(holder)) rmSync(LOCK, { force: true });
      else if (tries > 2_000) throw new Error(`${LOCK} held by process ${holder} for 10 s`);
      else Atomics.wait(pause, 0, 0, 5);
    }
  }
  try {
    change();
  } finally {
    rmSync(LOCK, { force: true });
  }
}

/** The file's lines but `marker`'s and those of test processes that died without removing theirs. */
function kept(text: string, marker: string): string {
  return text
    .split('\n')
    .filter((line) => {
      if (line.endsWith(marker)) return false;
      const pid = new RegExp(`${TAG} (\\d+)-`).exec(line)?.[1];
      return pid === undefined || alive(Number(pid));
    })
    .join('\n');
}

/** Replaces the file's text at once: a renamed copy, or (when it cannot be replaced) in place. */
function replace(text: string): void {
  const copy = `${HOSTS}.agent-ingress-${process.pid}`;
  writeFileSync(copy, text, { mode: statSync(HOSTS).mode & 0o777 });
  try {
    renameSync(copy, HOSTS);
  } catch {
    rmSync(copy, { force: true });
    // One write over the old text, then the tail cut: every other line stays readable.
    const fd = openSync(HOSTS, 'r+');
    try {
      writeSync(fd, text, 0);
      ftruncateSync(fd, Buffer.byteLength(text));
    } finally {
      closeSync(fd);
    }
  }
}

/** Maps `names` to 127.0.0.1 until the returned function is called. */
export function mapToLoopback(names: string[]): () => void {
  const marker = `${TAG} ${process.pid}-${Math.random().toString(36).slice(2)}`;
  const lines = names.map((name) => `127.0.0.1 ${name} ${marker}\n`).join('');
  locked(() => {
    const current = readFileSync(HOSTS, 'utf8');
    appendFileSync(HOSTS, current === '' || current.endsWith('\n') ? lines : `\n${lines}`);
  });
  return () => locked(() => replace(kept(readFileSync(HOSTS, 'utf8'), marker)));
}
