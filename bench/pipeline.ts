import autocannon from 'autocannon';
import {
  INGEST_TOKEN,
  PUBLISH_PATH,
  publishBodies,
  startBenchService,
  startNoop,
} from './lib/pipeline-setup.ts';
import { report } from './lib/report.ts';

// Events/s end to end (Connect client → ingest → workers → file destinations, acknowledged
// when fsync'd) against a no-op Connect handler on the same stack fed the same payloads.
// Rounds alternate baseline and pipeline so the machine's noise hits both.

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 500);
const ROUND_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
// BENCH_TAP=1: a tap (at its highest rate) stays open on a catch-all subscription throughout.
const TAP = process.env.BENCH_TAP === '1';

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

async function load(url: string, bodies: Buffer[]) {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: ROUND_S,
    requests: bodies.map((body) => ({
      method: 'POST',
      path: PUBLISH_PATH,
      headers: { 'content-type': 'application/proto', authorization: `Bearer ${INGEST_TOKEN}` },
      body,
    })),
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `load against ${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`,
    );
  }
  return {
    eventsPerSecond: (result['2xx'] * EVENTS_PER_REQUEST) / result.duration,
    latency: result.latency,
  };
}

const service = await startBenchService();
const noop = await startNoop();
const stopTap = new AbortController();
try {
  const catchAll = service.subscriptionIds.at(-1)!;
  const tap = TAP
    ? await openTap(service.url, service.apiKey, catchAll, stopTap.signal)
    : undefined;
  const bodies = publishBodies(service.account, EVENTS_PER_REQUEST);
  const baseline: number[] = [];
  const measured: Awaited<ReturnType<typeof load>>[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    baseline.push((await load(noop.url, bodies)).eventsPerSecond);
    measured.push(await load(service.url, bodies));
  }
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const value = mean(measured.map((m) => m.eventsPerSecond));
  const base = mean(baseline);
  const last = measured.at(-1)!;
  report(
    {
      bench: 'pipeline',
      value: Math.round(value),
      unit: 'events/s',
      baseline: Math.round(base),
      ratio: Number((value / base).toFixed(3)),
    },
    [
      ['events per request', EVENTS_PER_REQUEST],
      ['request bytes (avg)', Math.round(bodies.reduce((n, b) => n + b.length, 0) / bodies.length)],
      ['connections / rounds × seconds', `${CONNECTIONS} / ${ROUNDS} × ${ROUND_S} s`],
      ['no-op Connect handler, events/s', Math.round(base)],
      ['pipeline (10 subscriptions → 2 file destinations), events/s', Math.round(value)],
      [
        'pipeline p50 / p99 request latency (last round), ms',
        `${last.latency.p50} / ${last.latency.p99}`,
      ],
      ['ratio', (value / base).toFixed(3)],
      [
        'tap open on a catch-all subscription (BENCH_TAP=1), messages read',
        tap?.messages ?? 'no tap',
      ],
    ],
  );
} finally {
  stopTap.abort();
  await Promise.all([service.stop(), noop.child.stop()]);
}
