import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { readTopic } from '../helpers/kafka.ts';

// `npm run dev:kafka` (docs/kafka.md): Kafka without Docker, as a user starts it. It says where
// its broker is; that broker takes and serves the docs' topic; Ctrl-C stops it cleanly.

/** True when a TCP connection to host:port is refused. */
function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

describe('npm run dev:kafka', () => {
  it('prints a bootstrap address whose broker serves the topic, and stops on Ctrl-C', async () => {
    const child = spawn('npm', ['run', '--silent', 'dev:kafka'], {
      cwd: join(import.meta.dirname, '..', '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: Ctrl-C reaches npm and the script alike
    });
    let bootstrap: string | undefined;
    try {
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      const first = (await lines.next()).value as string;
      bootstrap =
        /^Kafka \(librdkafka's mock cluster\) at (127\.0\.0\.1:\d+); topics: edge-traffic$/.exec(
          first,
        )?.[1];
      expect(bootstrap, first).toBeDefined();
      expect((await lines.next()).value).toBe(
        'A destination for it (the service on this machine):',
      );
      expect((await lines.next()).value).toBe(
        `  npm run cli -- api event_destinations create --target '{"kafka":{"brokers":["${bootstrap}"],"topic":"edge-traffic"}}'`,
      );

      // kcat, as a user would try it: key and value split at the first ':'.
      execFileSync('kcat', ['-P', '-b', bootstrap!, '-t', 'edge-traffic', '-K:'], {
        input: 'k:through dev:kafka\n',
      });
      const messages = await readTopic([bootstrap!], 'edge-traffic', 1);
      expect(messages.map(({ key, value }) => ({ key, value }))).toEqual([
        { key: 'k', value: 'through dev:kafka' },
      ]);
    } finally {
      const exited = once(child, 'exit');
      process.kill(-child.pid!, 'SIGINT');
      await exited;
    }
    // Stopped with it: nothing listens at the address any more.
    const [host, port] = bootstrap!.split(':');
    await expect.poll(() => refused(host, Number(port)), { timeout: 10_000 }).toBe(true);
  }, 60_000);
});
