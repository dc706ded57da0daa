import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { BenchResult } from './lib/report.ts';

// `npm run bench:all`: every benchmark once, in sequence, then docs/performance.md's table
// (between its bench:all markers) written from this one run, so no figure in it comes from
// another day or another machine state. Each bench's own output goes to the terminal as it runs.
// BENCH_ALL_ONLY=pipeline,filter runs some of them (the table keeps only those, for a try).

const ROOT = join(import.meta.dirname, '..');
const PAGE = join(ROOT, 'docs', 'performance.md');
const BEGIN = '<!-- bench:all table: written by `npm run bench:all`, do not edit by hand -->';
const END = '<!-- bench:all table end -->';
// The soak runs shorter here than alone (`npm run bench:soak`: 600 s) to keep the whole run short.
const SOAK_S = Number(process.env.BENCH_ALL_SOAK_S ?? 120);

interface Bench {
  script: string;
  env?: Record<string, string>;
  /** What each JSON line (by its `bench` name) measures, and its goal. */
  lines: Record<string, { measures: string; goal: string }>;
}

const BENCHES: Bench[] = [
  {
    script: 'pipeline',
    lines: {
      'pipeline-cpu': {
        measures:
          'service CPU µs per acknowledged event (all threads, /proc), Connect → workers → 10 subscriptions (5 filtered, 3 projected) → 2 file destinations, fsync acknowledged; baseline: no-op Connect handler on the same stack (decodes with protobuf-es)',
        goal: '≤ 8 µs',
      },
      'pipeline-cpu-floor': {
        measures:
          'the same rounds against the floor: the same HTTP server reading the body and answering without decoding',
        goal: '≤ 8 µs',
      },
      'noop-cpu-floor': {
        measures:
          'the no-op Connect handler against the floor, same rounds: what decoding with protobuf-es costs',
        goal: 'none: a baseline',
      },
      pipeline: {
        measures: 'events/s of the same rounds (the load generator shares the cores)',
        goal: 'none: CPU per event is the measure',
      },
    },
  },
  {
    script: 'filter',
    lines: {
      filter: {
        measures: 'evals/s, compiled CEL filters vs hand-written JS, 9 typical filters',
        goal: '≥ 0.25',
      },
      'filter-cached': {
        measures: 'evals/s with the result cache, repeating connection tuples, vs JS',
        goal: '≥ 0.8',
      },
    },
  },
  {
    script: 'clickhouse',
    lines: {
      clickhouse: {
        measures: 'rows/s, ClickHouse sink vs raw `@clickhouse/client` JSONEachRow insert',
        goal: '≥ 1.5',
      },
    },
  },
  {
    script: 'kafka',
    lines: {
      kafka: {
        measures: 'messages/s, Kafka sink vs raw @platformatic/kafka `send` of the same messages',
        goal: '≥ 1.0',
      },
    },
  },
  {
    script: 'latency',
    lines: {
      latency: {
        measures:
          'Publish p99 (ms), open loop, vs the no-op handler at the same rate: 50 % of the lower of their maximum throughputs',
        goal: '≤ 1.1× the no-op',
      },
    },
  },
  {
    script: 'startup',
    // 3 rounds instead of 5: each spawns the service and PGlite twice (a first start is initdb).
    env: { BENCH_ROUNDS: '3' },
    lines: {
      'startup-first': {
        measures: 'ms to "listening", first start (empty DATA_DIR) vs PGlite alone',
        goal: '≤ 4,000 ms',
      },
      'startup-restart': {
        measures: 'ms to "listening", restart (same DATA_DIR) vs PGlite alone',
        goal: '≤ 2,000 ms',
      },
    },
  },
  {
    script: 'edge',
    lines: {
      edge: {
        measures:
          "req/s of `GET /` (1 KiB answers) through the edge and an `ssh -R` tunnel to the service vs the same ssh client's remote forward to OpenSSH's own sshd (same local server)",
        goal: '≥ 1.0',
      },
      'edge-ngrok': {
        measures:
          "req/s through the edge and ngrok's SDK (@ngrok/ngrok, muxado) vs the same sshd remote forward",
        goal: '≥ 1.0',
      },
      'edge-sshd': {
        measures:
          "req/s through sshd's remote forward (the baseline above) vs the local server direct",
        goal: 'none: a baseline',
      },
    },
  },
  {
    script: 'policy',
    lines: {
      'policy-cpu': {
        measures:
          'service CPU µs per request (all threads, /proc) through the edge and an `ssh -R` tunnel with a five-rule Traffic Policy (basic-auth, restrict-ips, rate-limit, add-headers, log) vs the same tunnel without a policy, rounds alternating',
        goal: '≤ 1.11 (the req/s bar in CPU)',
      },
      policy: {
        measures: 'req/s of the same rounds, policy vs none (the load generator shares the cores)',
        goal: '≥ 0.9',
      },
    },
  },
  {
    script: 'soak',
    env: { BENCH_SOAK_S: String(SOAK_S), BENCH_SOAK_LOAD: '1' },
    lines: {
      soak: {
        measures: `the service process's max RSS (MiB; the embedded store's own process is printed beside it) at full load over ${SOAK_S} s (bench:all's duration; alone: 600 s at 50 %) vs the first sample`,
        goal: '≤ 512 MiB, flat',
      },
    },
  },
];

/** Runs `npm run bench:<script>`, its output passed through; resolves with stdout and exit code. */
function run(bench: Bench): Promise<{ stdout: string; code: number | null; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '-s', `bench:${bench.script}`], {
      cwd: ROOT,
      env: { ...process.env, ...bench.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      process.stdout.write(chunk);
    });
    child.on('close', (code) =>
      resolve({ stdout, code, seconds: (performance.now() - started) / 1000 }),
    );
  });
}

const number = (n: number) => n.toLocaleString('en-US');

function rows(bench: Bench, outcome: Awaited<ReturnType<typeof run>>): string[] {
  const results = new Map<string, BenchResult>();
  for (const line of outcome.stdout.split('\n')) {
    if (line.startsWith('{"bench":')) {
      const result: BenchResult = JSON.parse(line);
      results.set(result.bench, result);
    }
  }
  return Object.entries(bench.lines).map(([name, { measures, goal }]) => {
    const r = results.get(name);
    if (r === undefined) {
      return `| \`bench:${bench.script}\` ${name} | ${measures} | failed (exit ${outcome.code}) | | | | ${goal} |`;
    }
    const spread = r.spread
      ? `${r.spread.min} / ${r.spread.median} / ${r.spread.max} (${r.spread.rounds})`
      : 'n/a';
    return `| \`bench:${bench.script}\` ${name} | ${measures} | ${number(r.value)} ${r.unit} | ${number(r.baseline)} | ${r.ratio} | ${spread} | ${goal} |`;
  });
}

const only = process.env.BENCH_ALL_ONLY?.split(',');
const chosen = BENCHES.filter((b) => only === undefined || only.includes(b.script));
const loadBefore = loadavg()[0];
const started = new Date();
const table: string[] = [];
const durations: string[] = [];
for (const bench of chosen) {
  process.stdout.write(`\n=== npm run bench:${bench.script}\n`);
  const outcome = await run(bench);
  table.push(...rows(bench, outcome));
  durations.push(`${bench.script} ${Math.round(outcome.seconds)} s`);
}
const minutes = (Date.now() - started.getTime()) / 60_000;
const text = [
  BEGIN,
  '',
  `One \`npm run bench:all\` run, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ` +
    `${minutes.toFixed(1)} min (${durations.join(', ')}); Node ${process.versions.node}; ` +
    `load average ${loadBefore.toFixed(1)} at the start, ${loadavg()[0].toFixed(1)} at the end ` +
    "(2 cores). Spread: the per-round ratios' min / median / max (rounds).",
  '',
  '| Bench | Measures | Project | Baseline | Ratio | Spread | Goal |',
  '|---|---|---|---|---|---|---|',
  ...table,
  '',
  END,
].join('\n');
const page = readFileSync(PAGE, 'utf8');
const from = page.indexOf(BEGIN);
const to = page.indexOf(END);
if (from < 0 || to < from) throw new Error(`${PAGE} has no bench:all markers (${BEGIN})`);
writeFileSync(PAGE, page.slice(0, from) + text + page.slice(to + END.length));
process.stdout.write(`\n${text}\n\ndocs/performance.md's benchmark table written.\n`);
