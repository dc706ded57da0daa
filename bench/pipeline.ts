import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import {
  INGEST_TOKEN,
  PUBLISH_PATH,
  publishBodies,
  startBenchService,
  startFloor,
  startNoop,
} from './lib/pipeline-setup.ts';
import { processCpuMs, threadCpuMs } from './lib/process-cpu.ts';
import { report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median } from './lib/stats.ts';

// Service CPU per acknowledged event (Connect client → ingest → workers → 10 subscriptions → 2
// file destinations, acknowledged when fsync'd) against two baselines fed the same payloads: the
// no-op Connect handler (the same stack, decoding each request with protobuf-es) and the floor
// (the same HTTP server reading the body and answering without decoding it). The load
// generator shares the machine's cores, so events/s saturates on the client; the server
// process's own CPU time (user + system, every thread, from /proc) per event it acknowledged
// is the measure. Each round rotates which goes first.
// BENCH_PROFILE=<dir>: the service runs under `node --cpu-prof` (workers too) and writes its
// profiles there on exit (read them with `node bench/profile-stages.ts <dir>`).

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 500);
const ROUND_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
// Requests still in flight when a round's load stops finish within this; their CPU counts.
const SETTLE_MS = 300;
// BENCH_TAP=1: a tap (at its highest rate) stays open on a catch-all subscription throughout.
const TAP = process.env.BENCH_TAP === '1';
const PROFILE_DIR = process.env.BENCH_PROFILE;

/** Opens a tap on `subscriptionId` and reads it until `signal` aborts; counts its messages. */
async function openTap(url: string, apiKey: string, subscriptionId: string, signal: AbortSignal) {
  const response = await fetch(
    `${url}/event_subscriptions/${subscriptionId}/tap?rate=100&max_seconds=600`,
    {
      headers: { authorization: `Bearer ${apiKey}` },
      signal,
    },
  );
  if (response.status !== 200) throw new Error(`tap: ${response.status} ${await response.text()}`);
  const seen = { messages: 0 };
  void (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body!) {
        seen.messages += decoder.decode(chunk, { stream: true }).split('event: event').length - 1;
      }
    } catch {}
  })();
  return seen;
}

/** One round against one server: events/s acknowledged and its CPU µs per acknowledged event. */
interface Round {
  eventsPerSecond: number;
  cpuUsPerEvent: number;
  p50: number;
  p99: number;
  /** Acknowledged events, and the round's span on the monotonic clock (µs), for profiles. */
  events: number;
  window: [number, number];
  /** CPU ms by kind of thread over the round. */
  threads: Map<string, number>;
}

/** Now on the monotonic clock, µs: the clock V8's CPU profiles time their samples by. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

async function load(url: string, pid: number, bodies: Buffer[], durationS: number) {
  const start = monotonicUs();
  const cpuBefore = processCpuMs(pid);
  const threadsBefore = threadCpuMs(pid);
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: durationS,
    requests: bodies.map((body) => ({
      method: 'POST',
      path: PUBLISH_PATH,
      headers: { 'content-type': 'application/proto', authorization: `Bearer ${INGEST_TOKEN}` },
      body,
    })),
  });
  await sleep(SETTLE_MS);
  const cpuMs = processCpuMs(pid) - cpuBefore;
  const threads = threadCpuMs(pid);
  for (const [kind, ms] of threadsBefore) threads.set(kind, (threads.get(kind) ?? 0) - ms);
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `load against ${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`,
    );
  }
  const events = result['2xx'] * EVENTS_PER_REQUEST;
  return {
    eventsPerSecond: events / result.duration,
    cpuUsPerEvent: (cpuMs * 1000) / events,
    p50: result.latency.p50,
    p99: result.latency.p99,
    events,
    window: [start, monotonicUs()],
    threads,
  } satisfies Round;
}

const service = await startBenchService(
  PROFILE_DIR === undefined ? {} : { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${PROFILE_DIR}` },
);
const noop = await startNoop();
const floor = await startFloor();
const stopTap = new AbortController();
try {
  const catchAll = service.subscriptionIds.at(-1)!;
  const tap = TAP
    ? await openTap(service.url, service.apiKey, catchAll, stopTap.signal)
    : undefined;
  const bodies = publishBodies(service.account, EVENTS_PER_REQUEST);
  const targets = {
    floor: { url: floor.url, pid: floor.child.process.pid! },
    noop: { url: noop.url, pid: noop.child.process.pid! },
    pipeline: { url: service.url, pid: service.pid },
  };
  const names = Object.keys(targets) as (keyof typeof targets)[];
  // Warm-up (JIT, file handles, batch sizes) is not counted.
  for (const { url, pid } of Object.values(targets)) await load(url, pid, bodies, WARMUP_S);
  const rounds = { floor: [] as Round[], noop: [] as Round[], pipeline: [] as Round[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...names.slice(round % names.length), ...names.slice(0, round % names.length)];
    for (const which of order) {
      rounds[which].push(await load(targets[which].url, targets[which].pid, bodies, ROUND_S));
    }
  }
  // The pipeline's CPU by kind of thread, µs per event over all measured rounds.
  const pipelineEvents = rounds.pipeline.reduce((n, r) => n + r.events, 0);
  const byThread = new Map<string, number>();
  for (const r of rounds.pipeline) {
    for (const [kind, ms] of r.threads) byThread.set(kind, (byThread.get(kind) ?? 0) + ms);
  }
  for (const [kind, ms] of byThread)
    byThread.set(kind, Number(((ms * 1000) / pipelineEvents).toFixed(2)));
  if (PROFILE_DIR !== undefined) {
    // The measured pipeline rounds, so the profile is read for them alone (not start-up).
    const windows = rounds.pipeline.map((r) => ({ window: r.window, events: r.events }));
    const threads = Object.fromEntries(byThread);
    // The service's profiles may not be written yet (they are at its exit): make the folder.
    mkdirSync(PROFILE_DIR, { recursive: true });
    writeFileSync(join(PROFILE_DIR, 'windows.json'), JSON.stringify({ windows, threads }));
  }
  const med = (
    which: keyof typeof rounds,
    key: 'cpuUsPerEvent' | 'eventsPerSecond' | 'p50' | 'p99',
  ) => median(rounds[which].map((r) => r[key]));
  /** Per-round CPU ratios of `which` to `to` (the same round's). */
  const cpuRatios = (which: keyof typeof rounds, to: keyof typeof rounds) =>
    rounds[which].map((r, i) => r.cpuUsPerEvent / rounds[to][i].cpuUsPerEvent);
  const rateRatios = rounds.pipeline.map(
    (r, i) => r.eventsPerSecond / rounds.noop[i].eventsPerSecond,
  );
  const us = (value: number) => Number(value.toFixed(2));
  const perRound = (which: keyof typeof rounds) =>
    rounds[which].map((r) => r.cpuUsPerEvent.toFixed(2)).join(', ');
  const rows: [string, string | number][] = [
    ['events per request', EVENTS_PER_REQUEST],
    ['request bytes (avg)', Math.round(bodies.reduce((n, b) => n + b.length, 0) / bodies.length)],
    ['connections / rounds × seconds', `${CONNECTIONS} / ${ROUNDS} × ${ROUND_S} s`],
    [
      'floor (HTTP server reads the body, no decode), CPU µs/event (median)',
      us(med('floor', 'cpuUsPerEvent')),
    ],
    ['  per round', perRound('floor')],
    [
      'no-op Connect handler (protobuf-es decode), CPU µs/event (median)',
      us(med('noop', 'cpuUsPerEvent')),
    ],
    ['  per round', perRound('noop')],
    [
      'pipeline (10 subscriptions → 2 file destinations), service CPU µs/event (median)',
      us(med('pipeline', 'cpuUsPerEvent')),
    ],
    ['  per round', perRound('pipeline')],
    ...[...byThread].map(([kind, us]): [string, number] => [`  of which ${kind}`, us]),
    [
      'ratios of the medians: no-op / floor, pipeline / floor, pipeline / no-op',
      [
        med('noop', 'cpuUsPerEvent') / med('floor', 'cpuUsPerEvent'),
        med('pipeline', 'cpuUsPerEvent') / med('floor', 'cpuUsPerEvent'),
        med('pipeline', 'cpuUsPerEvent') / med('noop', 'cpuUsPerEvent'),
      ]
        .map((r) => r.toFixed(2))
        .join(' / '),
    ],
    ['floor, events/s (median)', Math.round(med('floor', 'eventsPerSecond'))],
    ['no-op Connect handler, events/s (median)', Math.round(med('noop', 'eventsPerSecond'))],
    ['pipeline, events/s (median)', Math.round(med('pipeline', 'eventsPerSecond'))],
    [
      'pipeline p50 / p99 request latency (median of rounds), ms',
      `${med('pipeline', 'p50')} / ${med('pipeline', 'p99')}`,
    ],
    [
      'tap open on a catch-all subscription (BENCH_TAP=1), messages read',
      tap?.messages ?? 'no tap',
    ],
    ['goal', '≤ 8 µs of service CPU per event'],
  ];
  // One JSON line per pair: the table's rows print with the first.
  const pairs = [
    ['pipeline-cpu', 'pipeline', 'noop'],
    ['pipeline-cpu-floor', 'pipeline', 'floor'],
    ['noop-cpu-floor', 'noop', 'floor'],
  ] as const;
  for (const [i, [bench, which, to]] of pairs.entries()) {
    const cpu = spreadOf(cpuRatios(which, to));
    report(
      {
        bench,
        value: us(med(which, 'cpuUsPerEvent')),
        unit: 'µs CPU/event',
        baseline: us(med(to, 'cpuUsPerEvent')),
        ratio: cpu.median,
        spread: cpu,
      },
      i === 0
        ? rows
        : [
            [
              `${which} / ${to} CPU ratio, per round`,
              cpuRatios(which, to)
                .map((r) => r.toFixed(2))
                .join(', '),
            ],
          ],
    );
  }
  const rate = spreadOf(rateRatios);
  report(
    {
      bench: 'pipeline',
      value: Math.round(med('pipeline', 'eventsPerSecond')),
      unit: 'events/s',
      baseline: Math.round(med('noop', 'eventsPerSecond')),
      ratio: rate.median,
      spread: rate,
    },
    [],
  );
} finally {
  stopTap.abort();
  await Promise.all([service.stop(), noop.child.stop(), floor.child.stop()]);
}
