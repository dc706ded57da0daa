import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { givenMaxEventsPerSecond, maxEventsPerSecond, openLoop } from './lib/load.ts';
import { publishBodies, startBenchService } from './lib/pipeline-setup.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { linearFit, percentile, ratioOf } from './lib/stats.ts';
import { lineChartSvg } from './lib/svg-chart.ts';

// Soak: the service (as bench:pipeline runs it) under a fixed load, BENCH_SOAK_LOAD (default
// 0.5) of its maximum, for BENCH_SOAK_S seconds (default 600), sampling every BENCH_SOAK_SAMPLE_S
// (10) seconds its resident memory (/proc/<pid>/status VmRSS, worker threads included), from its
// /metrics the main thread's V8 heap (used), its external memory (ArrayBuffers and WebAssembly
// memories) and of that the embedded store's WebAssembly memory, and its event-loop delay: the
// p99 from /metrics when it serves one, else the slowest of five GET /healthz as a proxy.
// Writes bench/results/soak.svg. The baseline is the RSS of the first sample (load just started).
// The maximum throughput comes from BENCH_MAX_EVENTS_PER_S or a short run on a throwaway
// service, so the measured service starts cold. Completed output files (*.ndjson) are deleted as
// the run goes so a long soak does not fill the disk; the bytes are counted.

const DURATION_S = Number(process.env.BENCH_SOAK_S ?? 600);
const LOAD = Number(process.env.BENCH_SOAK_LOAD ?? 0.5);
const SAMPLE_S = Number(process.env.BENCH_SOAK_SAMPLE_S ?? 10);
const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 100);
const SVG = join(import.meta.dirname, 'results', 'soak.svg');
const LAG_METRICS = [
  'agent_ingress_nodejs_eventloop_lag_p99_seconds', // the service's own (src/shared/metrics.ts prefix)
  'nodejs_eventloop_lag_p99_seconds',
  'nodejs_eventloop_delay_p99_seconds',
  'nodejs_eventloop_lag_seconds',
];

/** The resident memory of the service's child processes (the embedded store's), MiB. */
function childrenRssMiB(pid: number): number {
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  } catch {
    return 0;
  }
  return text === '' ? 0 : text.split(' ').reduce((sum, child) => sum + rssMiB(Number(child)), 0);
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) / 1024;
}

const MEMORY_METRICS = {
  heap: 'agent_ingress_nodejs_heap_size_used_bytes',
  external: 'agent_ingress_nodejs_external_memory_bytes',
  wasm: 'agent_ingress_store_wasm_memory_bytes',
} as const;
type Memory = Record<keyof typeof MEMORY_METRICS, number>;

/** The service's heap, external and store WebAssembly memory in MiB (NaN where not served). */
async function memoryMiB(url: string): Promise<Memory> {
  let text = '';
  try {
    const res = await fetch(`${url}/metrics`);
    if (res.status === 200) text = await res.text();
  } catch {
    // Not served: NaN below.
  }
  const read = (name: string) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
    return m ? Number(m[1]) / 2 ** 20 : Number.NaN;
  };
  return {
    heap: read(MEMORY_METRICS.heap),
    external: read(MEMORY_METRICS.external),
    wasm: read(MEMORY_METRICS.wasm),
  };
}

/** How the event-loop delay is read: the service's own metric, or the /healthz proxy. */
async function delayProbe(url: string): Promise<{ source: string; read(): Promise<number> }> {
  const metric = async (): Promise<[string, number] | undefined> => {
    try {
      const res = await fetch(`${url}/metrics`);
      if (res.status !== 200) return undefined;
      const text = await res.text();
      for (const name of LAG_METRICS) {
        const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
        if (m) return [name, Number(m[1]) * 1000];
      }
    } catch {
      // No /metrics: use the proxy.
    }
    return undefined;
  };
  const found = await metric();
  if (found) {
    return {
      source: `/metrics ${found[0]} (ms)`,
      read: async () => (await metric())?.[1] ?? Number.NaN,
    };
  }
  return {
    source: 'no event-loop metric on /metrics: slowest of 5 GET /healthz (ms), a proxy',
    read: async () => {
      let worst = 0;
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        await (await fetch(`${url}/healthz`)).text();
        worst = Math.max(worst, performance.now() - t0);
        await sleep(50);
      }
      return worst;
    },
  };
}

/** Deletes completed output files under dir; returns their bytes. */
function deleteCompleted(dir: string): number {
  let bytes = 0;
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return 0;
  }
  for (const name of entries) {
    if (!name.endsWith('.ndjson')) continue;
    const path = join(dir, name);
    bytes += statSync(path).size;
    rmSync(path, { force: true });
  }
  return bytes;
}

async function main(): Promise<void> {
  // Measured on a throwaway service, so the soaked one starts cold.
  let max = givenMaxEventsPerSecond();
  if (max === undefined) {
    const probe = await startBenchService();
    try {
      const bodies = publishBodies(probe.account, EVENTS_PER_REQUEST);
      max = await maxEventsPerSecond(probe.url, bodies, EVENTS_PER_REQUEST);
    } finally {
      await probe.stop();
    }
  }
  const service = await startBenchService();
  try {
    const bodies = publishBodies(service.account, EVENTS_PER_REQUEST);
    const delay = await delayProbe(service.url);
    const rate = (LOAD * max.eventsPerSecond) / EVENTS_PER_REQUEST;
    const eventsDir = join(service.dataDir, 'events');
    let outputBytes = 0;
    const samples: ({ t: number; rss: number; store: number; delay: number } & Memory)[] = [];
    const t0 = performance.now();
    const load = openLoop(service.url, bodies, { rate, durationMs: DURATION_S * 1000 });
    for (let k = 0; k * SAMPLE_S <= DURATION_S; k++) {
      await sleep(Math.max(0, t0 + k * SAMPLE_S * 1000 - performance.now()));
      const t = (performance.now() - t0) / 1000;
      const rss = rssMiB(service.pid);
      // The delay first: reading /metrics restarts the event-loop delay histogram.
      const lag = await delay.read();
      const store = childrenRssMiB(service.pid);
      samples.push({ t, rss, store, ...(await memoryMiB(service.url)), delay: lag });
      outputBytes += deleteCompleted(eventsDir);
      if (process.env.BENCH_DEBUG) process.stderr.write(`${JSON.stringify(samples.at(-1))}\n`);
    }
    const result = await load;
    outputBytes += deleteCompleted(eventsDir);

    const rss = samples.map((s) => s.rss);
    const delays = samples.map((s) => s.delay);
    const rssSlope = linearFit(samples.map((s) => [s.t / 60, s.rss])).slope;
    // Heaps and buffers grow for a while after the load starts; the trend after that is the leak signal.
    const settled = samples.filter((s) => s.t >= 60);
    const settledSlope =
      settled.length >= 3
        ? linearFit(settled.map((s) => [s.t / 60, s.rss])).slope.toFixed(2)
        : 'n/a (run > 80 s)';
    const delaySlope = linearFit(samples.map((s) => [s.t / 60, s.delay])).slope;
    mkdirSync(join(import.meta.dirname, 'results'), { recursive: true });
    writeFileSync(
      SVG,
      lineChartSvg(
        `Soak: ${Math.round(rate * EVENTS_PER_REQUEST)} events/s (${LOAD * 100} % of max) for ${DURATION_S} s`,
        'seconds since the load started',
        [
          {
            label: 'service resident memory (VmRSS)',
            unit: 'MiB',
            color: '#1f77b4',
            points: samples.map((s) => [s.t, s.rss]),
          },
          {
            label: delay.source.startsWith('/metrics')
              ? 'event-loop delay p99'
              : 'event-loop delay proxy: slowest of 5 GET /healthz',
            unit: 'ms',
            color: '#d62728',
            points: samples.map((s) => [s.t, s.delay]),
          },
        ],
      ),
    );

    process.stdout.write(
      `max throughput ${Math.round(max.eventsPerSecond).toLocaleString('en-US')} events/s (${max.source}); ` +
        `load ${Math.round(rate * EVENTS_PER_REQUEST).toLocaleString('en-US')} events/s = ${rate.toFixed(1)} req/s × ${EVENTS_PER_REQUEST} events\n` +
        `event-loop delay: ${delay.source}\n\n`,
    );
    printTable(
      [
        't (s)',
        'RSS MiB',
        'store process RSS MiB',
        'heap MiB',
        'external MiB',
        'store WASM MiB',
        'delay ms',
      ],
      samples.map((s) => [
        s.t.toFixed(0),
        s.rss.toFixed(1),
        s.store.toFixed(1),
        s.heap.toFixed(1),
        s.external.toFixed(1),
        s.wasm.toFixed(1),
        s.delay.toFixed(1),
      ]),
    );
    process.stdout.write('\n');
    const mib = (n: number) => n.toFixed(1);
    report(
      {
        bench: 'soak',
        value: Number(mib(Math.max(...rss))),
        unit: 'MiB',
        baseline: Number(mib(rss[0])),
        ratio: ratioOf(Math.max(...rss), rss[0]),
        // Over the samples: each one's RSS against the first's.
        spread: spreadOf(rss.map((r) => r / rss[0])),
      },
      [
        ['RSS min / max, MiB', `${mib(Math.min(...rss))} / ${mib(Math.max(...rss))}`],
        // Not in the value: the goal is the process serving traffic; the machine holds both.
        [
          "the embedded store's process: RSS max; service + store max, MiB",
          `${mib(Math.max(...samples.map((s) => s.store)))}; ${mib(Math.max(...samples.map((s) => s.rss + s.store)))}`,
        ],
        ['RSS slope (least squares), MiB per minute', rssSlope.toFixed(2)],
        ...(['heap', 'external', 'wasm'] as const).map((k): [string, string] => [
          `${k === 'wasm' ? 'store WASM memory' : `${k} memory`} first / max / last, MiB`,
          [samples[0][k], Math.max(...samples.map((s) => s[k])), samples.at(-1)![k]]
            .map(mib)
            .join(' / '),
        ]),
        ['RSS slope from t = 60 s on, MiB per minute', settledSlope],
        [
          'event-loop delay min / max, ms',
          `${Math.min(...delays).toFixed(1)} / ${Math.max(...delays).toFixed(1)}`,
        ],
        ['event-loop delay slope, ms per minute', delaySlope.toFixed(2)],
        [
          'Publish requests sent / failed',
          `${result.sent.toLocaleString('en-US')} / ${result.failed}`,
        ],
        [
          'Publish latency p50 / p99 / p99.9, ms',
          [50, 99, 99.9].map((p) => percentile(result.latencies, p).toFixed(1)).join(' / '),
        ],
        ['output written (deleted as it completed), MiB', mib(outputBytes / 2 ** 20)],
        ['chart', SVG],
      ],
    );
  } finally {
    await service.stop();
  }
}

await main();
