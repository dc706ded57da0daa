import { maxEventsPerSecond, openLoop } from './lib/load.ts';
import { publishBodies, startBenchService, startNoop } from './lib/pipeline-setup.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { percentile, ratioOf } from './lib/stats.ts';

// Publish latency (request sent → answer, i.e. every event durable at its destinations) of the
// service (file destinations, the 10 subscriptions of bench:pipeline) against the no-op Connect
// handler (bench/noop-server.ts) at the same request rates: 25/50/75 % of the lower of the two
// servers' maximum throughputs, so that at 50 % neither runs past half its own capacity and a
// p99 measures latency, not a queue. Open loop: latency counts from when a request was due.
// Service and no-op alternate in segments of BENCH_SEGMENT_S seconds, so machine noise hits both.

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 100);
const LEVELS = [0.25, 0.5, 0.75];
const SEGMENT_S = Number(process.env.BENCH_SEGMENT_S ?? 5);
const SEGMENTS = Number(process.env.BENCH_SEGMENTS ?? 3);

interface Totals {
  latencies: number[];
  failed: number;
  sent: number;
  /** Each segment's p99, for the spread. */
  p99s: number[];
}

const perSecond = (n: number) => Math.round(n).toLocaleString('en-US');

const empty = (): Totals => ({ latencies: [], failed: 0, sent: 0, p99s: [] });

async function main(): Promise<void> {
  const service = await startBenchService();
  let noop: Awaited<ReturnType<typeof startNoop>> | undefined;
  try {
    noop = await startNoop();
    const bodies = publishBodies(service.account, EVENTS_PER_REQUEST);
    const maxima = {
      service: await maxEventsPerSecond(service.url, bodies, EVENTS_PER_REQUEST),
      noop: await maxEventsPerSecond(noop.url, bodies, EVENTS_PER_REQUEST),
    };
    const max = Math.min(maxima.service.eventsPerSecond, maxima.noop.eventsPerSecond);
    const results = [];
    for (const level of LEVELS) {
      const rate = (level * max) / EVENTS_PER_REQUEST;
      const totals = { service: empty(), noop: empty() };
      for (let segment = 0; segment < SEGMENTS; segment++) {
        const order =
          segment % 2 === 0 ? (['noop', 'service'] as const) : (['service', 'noop'] as const);
        for (const which of order) {
          const url = which === 'service' ? service.url : noop.url;
          const r = await openLoop(url, bodies, { rate, durationMs: SEGMENT_S * 1000 });
          totals[which].latencies.push(...r.latencies);
          totals[which].failed += r.failed;
          totals[which].sent += r.sent;
          totals[which].p99s.push(percentile(r.latencies, 99));
        }
      }
      results.push({ level, rate, ...totals });
    }

    const ms = (t: Totals, p: number) => percentile(t.latencies, p).toFixed(1);
    process.stdout.write(
      `max throughput: service ${perSecond(maxima.service.eventsPerSecond)}, no-op handler ` +
        `${perSecond(maxima.noop.eventsPerSecond)} events/s (${maxima.service.source}); load levels ` +
        `are of the lower, ${perSecond(max)}; ${EVENTS_PER_REQUEST} events per request; ` +
        `${SEGMENTS} × ${SEGMENT_S} s per level and server, interleaved\n` +
        'latency in ms from when each request was due to its answer (open loop)\n\n',
    );
    printTable(
      [
        'load',
        'events/s',
        'req/s',
        'requests',
        'failed',
        'p50',
        'p99',
        'p99.9',
        'no-op p50',
        'no-op p99',
        'no-op p99.9',
      ],
      results.map((r) => [
        `${r.level * 100} %`,
        Math.round(r.rate * EVENTS_PER_REQUEST),
        r.rate.toFixed(1),
        r.service.sent,
        r.service.failed + r.noop.failed,
        ms(r.service, 50),
        ms(r.service, 99),
        ms(r.service, 99.9),
        ms(r.noop, 50),
        ms(r.noop, 99),
        ms(r.noop, 99.9),
      ]),
    );
    process.stdout.write(
      "\nGoal: p99 at 50 % load <= 1.1x the no-op handler's in the same run.\n\n",
    );
    const half = results.find((r) => r.level === 0.5)!;
    const value = percentile(half.service.latencies, 99);
    const baseline = percentile(half.noop.latencies, 99);
    report(
      {
        bench: 'latency',
        value: Number(value.toFixed(1)),
        unit: 'ms',
        baseline: Number(baseline.toFixed(1)),
        ratio: ratioOf(value, baseline),
        spread: spreadOf(half.service.p99s.map((p99, i) => p99 / half.noop.p99s[i])),
      },
      [],
    );
  } finally {
    await noop?.child.stop();
    await service.stop();
  }
}

await main();
