import { cachedFilter } from '../src/data-plane/filter/cached-filter.ts';
import { compileFilter } from '../src/data-plane/filter/index.ts';
import { type EventJson, trafficToJson } from '../src/data-plane/wire-json/to-json.ts';
import type { HttpRequestComplete } from '../src/gen/agent_ingress/events/v0/traffic_pb.ts';
import { generateEvents, seededRandom } from '../test/helpers/events.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { geomean, median, ratioOf } from './lib/stats.ts';

// Evaluations per second of the project's compiled CEL filters, called on trafficToJson output as
// the route-events worker calls them, against hand-written JS predicates doing the same test on
// the same events (the baseline). Rounds interleave every case so machine noise hits all of
// them; each figure is the median over rounds.
//
// Two workloads: "distinct" (generated traffic, nearly every connection tuple different: the
// worst case, and what the JSON line `filter` reports) and "repeating" (the same events drawn
// from REPEAT_TUPLES tuples, as when a few clients talk to a few hosts): there the
// tuple-keyed result cache (src/data-plane/filter/cached-filter.ts) answers, reported as `filter-cached`.

const TYPE = 'http_request_complete.v0';
const EVENTS = 4096;
const REPEAT_TUPLES = Number(process.env.BENCH_REPEAT_TUPLES ?? 256);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const SLICE_MS = Number(process.env.BENCH_SLICE_MS ?? 40);

interface Conn {
  client_ip: string;
  server_ip: string;
  server_name: string;
  server_port: number;
}
const conn = (e: EventJson) => e.conn as Conn;

const API_OR_SHOP = /^(api|shop)\./;
const IP_LIST = ['10.1.20.30', '10.2.0.1', '10.0.5.5', '10.3.3.3', '10.1.1.1', '10.2.2.2'];

// Typical subscription filters (Filterable fields only) and the JS a person would write instead.
const CASES: [string, (e: EventJson) => boolean][] = [
  ['conn.server_port == 443', (e) => conn(e).server_port === 443],
  [
    'conn.server_name.endsWith(".example.com")',
    (e) => conn(e).server_name.endsWith('.example.com'),
  ],
  ['conn.client_ip.startsWith("10.1.")', (e) => conn(e).client_ip.startsWith('10.1.')],
  [
    `conn.client_ip in ${JSON.stringify(IP_LIST).replaceAll(',', ', ')}`,
    (e) => IP_LIST.includes(conn(e).client_ip),
  ],
  ['conn.server_name.matches("^(api|shop)\\\\.")', (e) => API_OR_SHOP.test(conn(e).server_name)],
  [
    'conn.server_port == 443 && conn.server_name.endsWith(".example.com")',
    (e) => {
      const c = conn(e);
      return c.server_port === 443 && c.server_name.endsWith('.example.com');
    },
  ],
  [
    'conn.client_ip.startsWith("10.1.") || conn.client_ip.startsWith("10.2.")',
    (e) => {
      const ip = conn(e).client_ip;
      return ip.startsWith('10.1.') || ip.startsWith('10.2.');
    },
  ],
  [
    'conn.server_name.matches("^(api|shop)\\\\.") && conn.server_port != 80',
    (e) => {
      const c = conn(e);
      return API_OR_SHOP.test(c.server_name) && c.server_port !== 80;
    },
  ],
  [
    '(conn.server_port == 443 || conn.server_port == 8443) && conn.server_ip in ["192.0.2.1", "192.0.2.2", "192.0.2.3"]',
    (e) => {
      const c = conn(e);
      return (
        (c.server_port === 443 || c.server_port === 8443) &&
        ['192.0.2.1', '192.0.2.2', '192.0.2.3'].includes(c.server_ip)
      );
    },
  ],
];

/** Generated HTTP events as the worker sees them: trafficToJson of the decoded payload. */
function distinctEvents(): EventJson[] {
  const toJson = trafficToJson(TYPE);
  return generateEvents(EVENTS, { accounts: ['ac_bench'], tcpShare: 0, seed: 11 }).map((e) =>
    toJson(e.payload.value as HttpRequestComplete),
  );
}

// A fresh string with the same characters: decoded events never share string objects, so the
// cache's Map lookups must not get identical keys for free.
const copy = (s: string) => s.split('').join('');

/** The same events with their tuples drawn from REPEAT_TUPLES of them. */
function repeatingEvents(events: EventJson[]): EventJson[] {
  const random = seededRandom(5);
  return events.map((e) => {
    const t = conn(events[Math.floor(random() * REPEAT_TUPLES)]);
    return {
      ...e,
      conn: {
        ...conn(e),
        client_ip: copy(t.client_ip),
        server_ip: copy(t.server_ip),
        server_name: copy(t.server_name),
        server_port: t.server_port,
      },
    };
  });
}

type Loop = (reps: number) => number;

// Each case gets its own generated loop, so the call site `fn(...)` stays monomorphic and one
// case's JIT feedback does not slow another down; hits are counted so nothing is optimized away.
// The source differs per loop (`name`): V8 caches compiled source, and loops of identical text
// share their feedback, so `fn(...)` saw every case's predicate and went megamorphic.
function makeLoop(name: string, fn: (e: EventJson) => boolean, events: EventJson[]): Loop {
  const loop = new Function(
    'fn',
    'events',
    'reps',
    `// ${name.replaceAll('\n', ' ')}\n` +
      'let hits = 0; for (let r = 0; r < reps; r++) for (let i = 0; i < events.length; i++) if (fn(events[i])) hits++; return hits;',
  ) as (fn: unknown, events: EventJson[], reps: number) => number;
  return (reps) => loop(fn, events, reps);
}

/** Runs whole passes over the events for about SLICE_MS; returns evaluations per second. */
function measure(loop: Loop, events: number): number {
  let passes = 0;
  const t0 = performance.now();
  let elapsed = 0;
  for (let reps = 1; elapsed < SLICE_MS; reps *= 2) {
    loop(reps);
    passes += reps;
    elapsed = performance.now() - t0;
  }
  return (passes * events) / (elapsed / 1000);
}

const VARIANTS = ['js', 'cel', 'cached'] as const;
type Variant = (typeof VARIANTS)[number];
const WORKLOADS = ['distinct', 'repeating'] as const;
type Workload = (typeof WORKLOADS)[number];

function main(): void {
  const distinct = distinctEvents();
  const workloads: Record<Workload, EventJson[]> = {
    distinct,
    repeating: repeatingEvents(distinct),
  };
  const tuples = (events: EventJson[]) =>
    new Set(
      events.map((e) => {
        const c = conn(e);
        return JSON.stringify([c.client_ip, c.server_ip, c.server_name, c.server_port]);
      }),
    ).size;

  const cases = CASES.map(([expression, js]) => {
    const cel = compileFilter(TYPE, expression);
    // One cache per workload, kept across rounds as a worker keeps it across requests.
    const fns: Record<Variant, () => (e: EventJson) => boolean> = {
      js: () => js,
      cel: () => (e) => cel.matches(e),
      cached: () => {
        const cached = cachedFilter(cel);
        return (e) => cached.matches(e);
      },
    };
    const loops = new Map<string, Loop>();
    const rates = new Map<string, number[]>();
    for (const w of WORKLOADS) {
      for (const v of VARIANTS) {
        const fn = fns[v]();
        for (const e of workloads[w]) {
          if (fn(e) !== js(e))
            throw new Error(`${v} and the JS predicate disagree on ${expression}`);
        }
        const loop = makeLoop(`${expression} ${w}/${v}`, fn, workloads[w]);
        loop(3); // warm-up
        loops.set(`${w}/${v}`, loop);
        rates.set(`${w}/${v}`, []);
      }
    }
    return { expression, loops, rates };
  });

  // Interleaved rounds; the order of the variants rotates so none always runs first.
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of cases) {
      for (const w of WORKLOADS) {
        for (let k = 0; k < VARIANTS.length; k++) {
          const v = VARIANTS[(k + round) % VARIANTS.length];
          c.rates.get(`${w}/${v}`)!.push(measure(c.loops.get(`${w}/${v}`)!, workloads[w].length));
        }
      }
    }
  }

  const med = (c: (typeof cases)[number], key: string) => median(c.rates.get(key)!);
  const mps = (n: number) => (n / 1e6).toFixed(2);
  const rows = cases.map((c) => {
    const [js, cel, cached] = VARIANTS.map((v) => med(c, `distinct/${v}`));
    const [rjs, rcel, rcached] = VARIANTS.map((v) => med(c, `repeating/${v}`));
    return [
      c.expression,
      mps(js),
      mps(cel),
      (cel / js).toFixed(3),
      mps(cached),
      mps(rjs),
      mps(rcel),
      mps(rcached),
      (rcached / rjs).toFixed(3),
    ];
  });
  const gm = (key: string) => geomean(cases.map((c) => med(c, key)));
  // Each round's ratio of geometric means over the cases, for the spread.
  const roundRatios = (key: string, base: string) =>
    Array.from({ length: ROUNDS }, (_, r) => {
      const round = (k: string) => geomean(cases.map((c) => c.rates.get(k)![r]));
      return round(key) / round(base);
    });
  const g = Object.fromEntries(
    WORKLOADS.flatMap((w) => VARIANTS.map((v) => [`${w}/${v}`, gm(`${w}/${v}`)])),
  );
  rows.push([
    'geometric mean',
    mps(g['distinct/js']),
    mps(g['distinct/cel']),
    (g['distinct/cel'] / g['distinct/js']).toFixed(3),
    mps(g['distinct/cached']),
    mps(g['repeating/js']),
    mps(g['repeating/cel']),
    mps(g['repeating/cached']),
    (g['repeating/cached'] / g['repeating/js']).toFixed(3),
  ]);

  process.stdout.write(
    `${EVENTS} events: "distinct" has ${tuples(workloads.distinct)} tuples, "repeating" ${tuples(workloads.repeating)}; ` +
      `median of ${ROUNDS} interleaved rounds, M evals/s\n\n`,
  );
  printTable(
    ['filter', 'JS', 'CEL', 'CEL/JS', 'cached', 'rep: JS', 'rep: CEL', 'rep: cached', 'cached/JS'],
    rows,
  );
  process.stdout.write(
    '\nJS: hand-written predicate (baseline); CEL: compileFilter().matches; cached: cachedFilter()\n' +
      'over it, keyed by the tuple fields the filter reads (on "distinct", filters on the port or\n' +
      'server name still hit; client_ip filters miss and the cache steps aside); rep: the repeating\n' +
      'workload. Goals: CEL/JS >= 0.25 (distinct), cached/JS >= 0.8 (repeating).\n\n',
  );
  report(
    {
      bench: 'filter',
      value: Math.round(g['distinct/cel']),
      unit: 'evals/s',
      baseline: Math.round(g['distinct/js']),
      ratio: ratioOf(g['distinct/cel'], g['distinct/js']),
      spread: spreadOf(roundRatios('distinct/cel', 'distinct/js')),
    },
    [],
  );
  report(
    {
      bench: 'filter-cached',
      value: Math.round(g['repeating/cached']),
      unit: 'evals/s',
      baseline: Math.round(g['repeating/js']),
      ratio: ratioOf(g['repeating/cached'], g['repeating/js']),
      spread: spreadOf(roundRatios('repeating/cached', 'repeating/js')),
    },
    [],
  );
}

main();
