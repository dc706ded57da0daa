import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { printTable } from './lib/report.ts';

// The per-stage CPU budget of bench:pipeline: reads the CPU profiles `BENCH_PROFILE=<dir> npm
// run bench:pipeline` leaves (the service's main thread and each route-events worker) and the
// measured rounds' time windows, and attributes every sample's self time in those windows to a
// stage by its innermost frame that names one. Time spent waiting (idle, a worker blocked in
// Atomics.wait for its next task) is not CPU and is left out.
// Run: npx node bench/profile-stages.ts <dir>

interface Frame {
  functionName: string;
  url: string;
}
interface ProfileNode {
  id: number;
  callFrame: Frame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

type Rule = [stage: string, test: (frame: Frame) => boolean];

const url = (pattern: RegExp) => (frame: Frame) => pattern.test(frame.url);
const named = (pattern: RegExp) => (frame: Frame) => pattern.test(frame.functionName);
/** Functions built at run time (new Function) have no URL: generated decoders and filters. */
const generated = (pattern: RegExp) => (frame: Frame) =>
  frame.url === '' && pattern.test(frame.functionName);

const WAITING = new Set(['(idle)', 'atomicsWaitLoop']);

// Project frames, innermost first wins: the stage a sample's self time belongs to.
const RULES: Rule[] = [
  ['filter', url(/\/src\/data-plane\/filter\/|\/re2js\/|\/cel-js\//)],
  ['filter', generated(/^matches$/)],
  ['project', generated(/^project$/)],
  ['serialize', named(/^envelope$/)],
  ['decode', url(/\/src\/(catalogue|data-plane\/wire-json)\//)],
  ['decode', generated(/^(d\d+|decodeEvent)$/)],
  [
    'route (ids, grouping)',
    url(
      /\/src\/data-plane\/pipeline\/(route-events|routing|sampling|tap-tee)\.ts|\/src\/shared\/ids\.ts/,
    ),
  ],
  [
    'hand-off (worker ↔ ingest thread)',
    url(/\/piscina\/|\/src\/data-plane\/pipeline\/worker-pool\.ts|\/workers\//),
  ],
  ['write', url(/\/src\/data-plane\/sinks\//)],
  [
    'batch',
    url(/\/src\/data-plane\/pipeline\/(batcher|destination|destinations|deliver|spool)\.ts/),
  ],
  ['acknowledge', url(/\/src\/data-plane\/ingest\/wire-answers\.ts/)],
  [
    'receive',
    url(
      /\/src\/data-plane\/ingest\/|\/src\/data-plane\/pipeline\/(admission|pipeline)\.ts|\/src\/shared\/http\/|\/fastify\/|\/@connectrpc\//,
    ),
  ],
  ['store (PGlite: config poll, audit relay)', url(/\/@electric-sql\/pglite\/|wasm:\/\//)],
  ['metrics', url(/\/prom-client\/|\/src\/shared\/metrics\.ts/)],
];

// When no project frame is on the stack (callbacks from Node itself): by Node's module.
const NODE_RULES: Rule[] = [
  ['write', url(/^node:(fs|internal\/fs)/)],
  ['receive', url(/^node:(net|_http_server|_http_common|internal\/http|internal\/stream_base)/)],
  ['acknowledge', url(/^node:_http_outgoing/)],
  ['garbage collection', named(/^\(garbage collector\)$/)],
];

function stageOf(chain: Frame[]): string {
  for (const rules of [RULES, NODE_RULES]) {
    for (const frame of chain) {
      for (const [stage, test] of rules) if (test(frame)) return stage;
    }
  }
  return 'other (Node internals, program)';
}

/** Self time (µs) per stage of one profile's samples inside `windows`. */
function stagesOf(profile: Profile, windows: [number, number][]): Map<string, number> {
  const parent = new Map<number, ProfileNode>();
  const nodes = new Map<number, ProfileNode>();
  for (const node of profile.nodes) {
    nodes.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node);
  }
  const stageById = new Map<number, string>();
  const stage = (id: number) => {
    let known = stageById.get(id);
    if (known === undefined) {
      const chain: Frame[] = [];
      for (let n = nodes.get(id); n !== undefined; n = parent.get(n.id)) chain.push(n.callFrame);
      known = WAITING.has(chain[0].functionName) ? 'waiting' : stageOf(chain);
      stageById.set(id, known);
    }
    return known;
  };
  const totals = new Map<string, number>();
  let time = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i];
    // A sample's self time is the interval up to the next sample.
    const self = profile.timeDeltas[i + 1] ?? 0;
    if (!windows.some(([from, to]) => time >= from && time < to)) continue;
    const name = stage(profile.samples[i]);
    totals.set(name, (totals.get(name) ?? 0) + self);
  }
  return totals;
}

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: node bench/profile-stages.ts <profile dir>');
const measured: {
  windows: { window: [number, number]; events: number }[];
  /** CPU µs per event of each kind of thread, from /proc over the same rounds. */
  threads: Record<string, number>;
} = JSON.parse(readFileSync(join(dir, 'windows.json'), 'utf8'));
const windows = measured.windows.map((r) => r.window);
const events = measured.windows.reduce((n, r) => n + r.events, 0);
const THREADS = { ingest: 'ingest thread (main)', workers: 'route-events workers' } as const;
type Thread = keyof typeof THREADS;

/** Profiled µs per stage, per thread kind (a profile per thread; thread 0 is the main one). */
const profiled: Record<Thread, Map<string, number>> = { ingest: new Map(), workers: new Map() };
for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  // Node names them CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile.
  const thread: Thread = file.split('.').at(-3) === '0' ? 'ingest' : 'workers';
  const profile: Profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  for (const [stage, us] of stagesOf(profile, windows)) {
    if (stage !== 'waiting') profiled[thread].set(stage, (profiled[thread].get(stage) ?? 0) + us);
  }
}

// A profile samples wall time: on a busy machine a thread waiting for a core is charged to the
// function it was in. Each thread kind's stage shares are therefore scaled to its CPU time as
// /proc measured it; threads that are not profiled (the libuv pool's fsync, V8's helpers) are
// listed as measured.
const budget = new Map<string, Record<Thread, number>>();
for (const thread of ['ingest', 'workers'] as const) {
  const total = [...profiled[thread].values()].reduce((a, b) => a + b, 0);
  const cpu = measured.threads[THREADS[thread]] ?? 0;
  for (const [stage, us] of profiled[thread]) {
    const row = budget.get(stage) ?? { ingest: 0, workers: 0 };
    row[thread] += (us / total) * cpu;
    budget.set(stage, row);
  }
}
const f = (us: number) => us.toFixed(2);
const rows: (string | number)[][] = [...budget]
  .sort((a, b) => b[1].ingest + b[1].workers - (a[1].ingest + a[1].workers))
  .map(([stage, t]) => [stage, f(t.ingest), f(t.workers), f(t.ingest + t.workers)]);
for (const [kind, us] of Object.entries(measured.threads)) {
  if (kind !== THREADS.ingest && kind !== THREADS.workers) rows.push([kind, '', '', f(us)]);
}
const all = Object.values(measured.threads).reduce((a, b) => a + b, 0);
rows.push(['total service CPU', '', '', f(all)]);
process.stdout.write(
  `${events.toLocaleString('en-US')} acknowledged events in ${windows.length} measured rounds; ` +
    'µs of service CPU per event\n\n',
);
printTable(['stage', 'ingest thread', 'workers', 'all'], rows);
