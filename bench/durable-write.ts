import { constants, readFileSync, rmSync } from 'node:fs';
import { type FileHandle, mkdtemp, open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median } from './lib/stats.ts';

// What the file sink's durable write costs the event loop's thread: a batch of 10 blocks of
// 700 bytes written to a file opened O_DSYNC (the sink: src/data-plane/sinks/file/sink.ts),
// against the same writev followed by an fdatasync (the baseline: what the sink did before).
// Both wait for the disk; the figure is the main thread's CPU per batch (Linux's /proc, 10 ms
// ticks), which pays each trip to libuv's thread pool. Rounds alternate the two.

const BATCHES = Number(process.env.BENCH_BATCHES ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BLOCKS = Array.from({ length: 10 }, () => Buffer.alloc(700, 'x'));

/** CPU time (user + system, ms) this process's main thread has used so far. */
function mainThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

type Way = 'dsync' | 'writeThenSync';

async function batchesOn(file: FileHandle, way: Way): Promise<void> {
  let position = 0;
  for (let i = 0; i < BATCHES; i++) {
    position += (await file.writev(BLOCKS, position)).bytesWritten;
    if (way === 'writeThenSync') await file.datasync();
  }
}

/** Main-thread CPU µs per batch, one way, on a new file in `dir`. */
async function round(dir: string, way: Way): Promise<number> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
  const file = await open(
    join(dir, `${way}-${Math.random()}`),
    way === 'dsync' ? flags | constants.O_DSYNC : flags,
  );
  const before = mainThreadCpuMs();
  await batchesOn(file, way);
  const cpuMs = mainThreadCpuMs() - before;
  await file.close();
  return (cpuMs * 1000) / BATCHES;
}

async function main(): Promise<void> {
  // On the disk the data directory uses, not a tmpfs: fdatasync must reach a device.
  const dir = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'durable-write-'));
  try {
    const us: Record<Way, number[]> = { dsync: [], writeThenSync: [] };
    for (let i = 0; i < ROUNDS; i++) {
      us.writeThenSync.push(await round(dir, 'writeThenSync'));
      us.dsync.push(await round(dir, 'dsync'));
    }
    const spread = spreadOf(us.dsync.map((value, i) => value / us.writeThenSync[i]));
    report(
      {
        bench: 'durable-write',
        value: Math.round(median(us.dsync)),
        unit: 'µs main-thread CPU/batch',
        baseline: Math.round(median(us.writeThenSync)),
        ratio: spread.median,
        spread,
      },
      [
        [`batches per round (10 × 700 B), rounds`, `${BATCHES}, ${ROUNDS}`],
        ['O_DSYNC writev, main-thread µs/batch (median)', Math.round(median(us.dsync))],
        ['writev + fdatasync, µs/batch (median)', Math.round(median(us.writeThenSync))],
      ],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
