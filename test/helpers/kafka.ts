import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const SOURCE = fileURLToPath(new URL('./kafka-mock.c', import.meta.url));
const CACHE_DIR = fileURLToPath(
  new URL('../../node_modules/.cache/agent-ingress/', import.meta.url),
);
const BINARY = join(CACHE_DIR, 'kafka-mock');
const DIR_PREFIX = 'agent-ingress-kafka-';
const START_TIMEOUT_MS = 10_000;
const COMMAND_TIMEOUT_MS = 5_000;
const STDERR_TAIL_BYTES = 4096;

/** A running librdkafka mock cluster: a real Kafka-protocol broker set for tests. */
export interface KafkaMock {
  /** Bootstrap addresses (`127.0.0.1:port`), one per broker; broker ids are 1..N in this order. */
  brokers: string[];
  /** Creates a topic (the mock answers no client's CreateTopics: it has no controller). */
  createTopic(name: string, partitions?: number): Promise<void>;
  /** Closes broker `id`'s connections (-1: all) and refuses new ones; clients see ECONNREFUSED. */
  brokerDown(id: number): Promise<void>;
  /** Lets broker `id` (-1: all) accept connections again on the same port, data intact. */
  brokerUp(id: number): Promise<void>;
  /** Answers the next Produce request with Kafka error `code` (e.g. 29, TOPIC_AUTHORIZATION_FAILED). */
  failNextProduce(code: number): Promise<void>;
  /** Stops the cluster (all data is in memory and goes with it) and removes its temp dir. */
  close(): Promise<void>;
}

/** Options for startKafka; topics are `name` (3 partitions) or `name:partitions`. */
export interface StartKafkaOptions {
  brokers?: number;
  topics?: string[];
}

/** One message read back by readTopic. */
export interface TopicMessage {
  key: string | null;
  value: string;
  partition: number;
  offset: number;
  headers: Record<string, string>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  // Safety net for a test that forgot close(): the launcher also exits on stdin EOF.
  for (const child of live) child.kill('SIGKILL');
});

/** Starts a mock cluster on random 127.0.0.1 ports, compiling the launcher on first use. */
export async function startKafka(opts: StartKafkaOptions = {}): Promise<KafkaMock> {
  const brokerCount = opts.brokers ?? 1;
  const topics = (opts.topics ?? []).map((t) => (t.includes(':') ? t : `${t}:3`));
  const binary = await compileLauncher();
  removeStaleDirs();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, 'owner.pid'), String(process.pid));
  const child = spawn(binary, [String(brokerCount), ...topics], {
    cwd: dir,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let stderrTail = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderrTail = (stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
  });
  // 'close', not 'exit': by then stderr is drained, so error messages carry the last words.
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  // EPIPE after the launcher died surfaces through exited, not as an unhandled 'error'.
  child.stdin!.on('error', () => undefined);
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const fail = (why: string) =>
    new Error(`kafka-mock: ${why}\n--- stderr tail ---\n${stderrTail || '(empty)'}`);

  const nextLine = async (what: string, timeoutMs: number): Promise<string> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(fail(`no answer to ${what} in ${timeoutMs} ms`)), timeoutMs);
    });
    const died = exited.then(() => Promise.reject(fail(`exited while waiting for ${what}`)));
    try {
      const next = await Promise.race([lines.next(), timeout, died]);
      if (next.done) {
        await Promise.race([exited, sleep(1000)]);
        throw fail(`stdout closed while waiting for ${what}`);
      }
      return next.value;
    } finally {
      clearTimeout(timer);
    }
  };

  let closing: Promise<void> | undefined;
  let brokers: string[];
  try {
    const line = await nextLine('BOOTSTRAP', START_TIMEOUT_MS);
    if (!line.startsWith('BOOTSTRAP ')) throw fail(`unexpected first line: ${line}`);
    brokers = line.slice('BOOTSTRAP '.length).trim().split(',');
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  // One command at a time: replies carry no id, so they must pair up in order.
  let queue: Promise<unknown> = Promise.resolve();
  const command = (line: string): Promise<void> => {
    const run = async () => {
      if (closing || child.exitCode !== null || child.signalCode !== null) {
        throw fail('not running');
      }
      child.stdin!.write(`${line}\n`);
      const reply = await nextLine(line, COMMAND_TIMEOUT_MS);
      if (reply !== 'OK') throw new Error(`kafka-mock: ${line}: ${reply}`);
    };
    const result = queue.then(run, run);
    queue = result.catch(() => undefined);
    return result;
  };

  return {
    brokers,
    createTopic: (name, partitions = 3) => command(`topic ${name} ${partitions}`),
    brokerDown: (id) => command(`down ${id}`),
    brokerUp: (id) => command(`up ${id}`),
    failNextProduce: (code) => command(`produce-error - ${code}`),
    close() {
      closing ??= (async () => {
        child.stdin!.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        if (child.exitCode === null && child.signalCode === null) await exited;
        clearTimeout(timer);
        rmSync(dir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}

/**
 * Reads a topic from the beginning with kcat (librdkafka: a client apart from the one under
 * test, which also checks what it reads: CRCs, compression) until it has expectedCount messages
 * or timeoutMs passes (then returns what it has). Throws if the mock has evicted the topic's
 * oldest messages (it keeps 5 MiB per partition), because a short read would otherwise look
 * like data lost by the code under test.
 */
export async function readTopic(
  brokers: string[],
  topic: string,
  expectedCount: number,
  timeoutMs = 15_000,
): Promise<TopicMessage[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const messages = await kcatRead(brokers, topic, deadline - Date.now());
    if (messages.length >= expectedCount) return messages;
    const evicted = evictedPartitions(messages);
    if (evicted.length > 0) {
      throw new Error(
        `readTopic(${topic}): the mock broker evicted old messages (${evicted.join(', ')}); ` +
          'it keeps only 5 MiB per partition, so produce less or use more partitions',
      );
    }
    if (Date.now() >= deadline) return messages;
    await sleep(200);
  }
}

interface KcatMessage {
  partition: number;
  offset: number;
  key: string | null;
  payload: string | null;
  headers?: string[];
}

/** Everything in the topic now: kcat consumes every partition to its end and exits. */
async function kcatRead(brokers: string[], topic: string, timeoutMs: number) {
  const args = ['-C', '-b', brokers.join(','), '-t', topic, '-o', 'beginning', '-e', '-q', '-J'];
  const { stdout } = await promisify(execFile)('kcat', args, {
    timeout: Math.max(timeoutMs, 1_000),
    maxBuffer: 1 << 30,
  }).catch((err: { stderr?: string }) => {
    throw new Error(`kcat ${args.join(' ')}: ${err.stderr || String(err)}`);
  });
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line): TopicMessage => {
      const m = JSON.parse(line) as KcatMessage;
      const headers: Record<string, string> = {};
      const pairs = m.headers ?? [];
      for (let i = 0; i < pairs.length; i += 2) headers[pairs[i]] = pairs[i + 1];
      return {
        key: m.key,
        value: m.payload ?? '',
        partition: m.partition,
        offset: m.offset,
        headers,
      };
    });
}

/** Partitions whose first message read is past offset 0: the mock dropped older batches. */
function evictedPartitions(messages: TopicMessage[]): string[] {
  const first = new Map<number, number>();
  for (const m of messages)
    first.set(m.partition, Math.min(first.get(m.partition) ?? m.offset, m.offset));
  return [...first]
    .filter(([, offset]) => offset > 0)
    .map(([p, offset]) => `p${p} starts at ${offset}`);
}

/** Removes dirs of test processes that died without close(); their launchers died with them. */
function removeStaleDirs(): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), name);
    try {
      const owner = Number.parseInt(readFileSync(join(dir, 'owner.pid'), 'utf8'), 10);
      process.kill(owner, 0);
    } catch (err) {
      // ESRCH: owner gone. ENOENT is a dir another worker is still setting up: leave it.
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
}

/** Compiles kafka-mock.c into the cache once (again when the source is newer); returns the binary. */
async function compileLauncher(): Promise<string> {
  const mtime = (path: string) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1;
  if (mtime(BINARY) >= mtime(SOURCE)) return BINARY;
  mkdirSync(CACHE_DIR, { recursive: true });
  // Parallel test workers may compile at once: each writes its own file, rename is atomic.
  const partial = `${BINARY}.${process.pid}.tmp`;
  try {
    await promisify(execFile)('gcc', ['-O2', '-Wall', '-o', partial, SOURCE, '-lrdkafka']);
    renameSync(partial, BINARY);
  } catch (err) {
    rmSync(partial, { force: true });
    const stderr = (err as { stderr?: string }).stderr || String(err);
    throw new Error(
      `kafka-mock: gcc failed (needs gcc and librdkafka-dev, see .ci/apt-packages):\n${stderr}`,
    );
  }
  return BINARY;
}
