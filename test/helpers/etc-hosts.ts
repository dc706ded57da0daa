import { readFileSync, writeFileSync } from 'node:fs';

// ngrok's SDK resolves the host of its server_addr itself (no resolver of ours to point at the
// service), and its TLS name must be that host: the tests map the names they dial to 127.0.0.1
// in /etc/hosts (the test runner is root, as in CI) and remove exactly their lines after.

const HOSTS = '/etc/hosts';

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

/** The file without the lines of test processes that died before removing theirs. */
function withoutStale(text: string): string {
  return text
    .split('\n')
    .filter((line) => {
      const pid = new RegExp(`${TAG} (\\d+)-`).exec(line)?.[1];
      return pid === undefined || alive(Number(pid));
    })
    .join('\n');
}

/** Maps `names` to 127.0.0.1 until the returned function is called. */
export function mapToLoopback(names: string[]): () => void {
  const marker = `${TAG} ${process.pid}-${Math.random().toString(36).slice(2)}`;
  const lines = names.map((name) => `127.0.0.1 ${name} ${marker}`);
  const current = withoutStale(readFileSync(HOSTS, 'utf8')).replace(/\n*$/, '\n');
  writeFileSync(HOSTS, `${current}${lines.join('\n')}\n`);
  return () => {
    const kept = readFileSync(HOSTS, 'utf8')
      .split('\n')
      .filter((line) => !line.endsWith(marker));
    writeFileSync(HOSTS, kept.join('\n'));
  };
}
