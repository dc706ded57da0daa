import { readdirSync, readFileSync } from 'node:fs';

// A process's CPU time from /proc: user + system, in clock ticks of 10 ms (USER_HZ is 100 on
// Linux for every architecture), of the whole process (every thread, workers included) or of
// its threads grouped by what they do.

const TICK_MS = 10;

/** The thread's name and its user + system CPU, ms, from a /proc stat line. */
function parseStat(stat: string): { name: string; cpuMs: number } {
  // The name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
  return {
    name: stat.slice(stat.indexOf('(') + 1, close),
    cpuMs: (Number(fields[11]) + Number(fields[12])) * TICK_MS,
  };
}

/** Milliseconds of CPU `pid` has used so far, every thread counted. */
export function processCpuMs(pid: number): number {
  return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8')).cpuMs;
}

/** What Node's threads do, by the names Node gives them. */
const THREAD_KINDS: Record<string, string> = {
  MainThread: 'ingest thread (main)',
  WorkerThread: 'route-events workers',
  'libuv-worker': 'libuv pool (file writes, fsync)',
  V8Worker: 'V8 background (GC, compiler)',
  DelayedTaskSche: 'V8 background (GC, compiler)',
};

/** Milliseconds of CPU each kind of thread of `pid` has used so far (threads alive now). */
export function threadCpuMs(pid: number): Map<string, number> {
  const byKind = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let thread: ReturnType<typeof parseStat>;
    try {
      thread = parseStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
    } catch {
      continue; // it ended meanwhile
    }
    const kind = THREAD_KINDS[thread.name] ?? 'other threads';
    byKind.set(kind, (byKind.get(kind) ?? 0) + thread.cpuMs);
  }
  return byKind;
}
