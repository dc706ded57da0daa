// Micro benchmark of the route-events worker's per-request work: routeRequest (read the request,
// filter, project, write each destination's block into a slab) on bench:pipeline's routing: the
// 10 subscriptions of bench/lib/pipeline-setup.ts, two file destinations, 500-event requests.
// Slabs are freed after each request, as the ingest thread does once delivery settles.
// Run: node bench/route-micro.ts
//      BENCH_BASE=/path/to/other/checkout node bench/route-micro.ts
// With BENCH_BASE, the other checkout's routeRequest runs too, alternating round by round in this
// process (CPU µs per event of both, and their ratio), after checking that both write the same
// blocks for the same requests (generated event ids masked).

import { resolve } from 'node:path';
import { publishBodies, SUBSCRIPTIONS } from './lib/pipeline-setup.ts';
import { spreadOf, spreadText } from './lib/spread.ts';

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 500);
const REQUESTS = 16;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 25);
const ROUND_EVENTS = Number(process.env.BENCH_ROUND_EVENTS ?? 25_000);
const ACCOUNT = 'ac_bench_route';
const TYPES = ['http_request_complete.v0', 'tcp_connection_closed.v0'];

interface Slabs {
  take: unknown;
  announce(): [number, SharedArrayBuffer][] | undefined;
}
interface Registry {
  learn(slabs: [number, SharedArrayBuffer][] | undefined): void;
  parts(block: unknown): { text: Uint8Array; meta: Uint8Array };
  free(block: unknown): void;
}
interface Delivery {
  destinationId: string;
  slab?: unknown;
  parts?: { text: Uint8Array; meta: Uint8Array };
}

/** One checkout's routeRequest with a slab pool and the ingest thread's registry of it. */
interface Build {
  name: string;
  route(body: Uint8Array): { events: number; blocks: Map<string, string>; output: Output };
}

/** What a request's events became: records and their NDJSON bytes, every destination's. */
interface Output {
  records: number;
  bytes: number;
}

async function load(name: string, root: string): Promise<Build> {
  const at = (path: string) => import(resolve(root, path));
  const { routeRequest } = await at('src/data-plane/pipeline/route-events.ts');
  const { compileRouting } = await at('src/data-plane/pipeline/routing.ts');
  const { SlabPool, SlabRegistry } = await at('src/data-plane/pipeline/block-slabs.ts');
  const routing = compileRouting({
    version: 1,
    subscriptions: SUBSCRIPTIONS.map((s, i) => ({
      id: `su_${i}`,
      accountId: ACCOUNT,
      sources: TYPES.map((type) => ({
        type,
        filter: s.filter ?? '',
        fields: type === TYPES[0] ? (s.fields ?? []) : [],
      })),
      destinationIds: [`ed_${i % 2}`],
    })),
  });
  const slabs: Slabs = new SlabPool(256 * 2 ** 20);
  const registry: Registry = new SlabRegistry();
  return {
    name,
    route(body) {
      const result = routeRequest(routing, body, 1_700_000_000_000, 10_000, undefined, slabs);
      if (result.kind !== 'routed') throw new Error(`${name}: ${result.kind}`);
      registry.learn(result.slabs);
      const blocks = new Map<string, string>();
      const output: Output = { records: 0, bytes: 0 };
      for (const delivery of result.deliveries as Delivery[]) {
        if (checking) {
          const parts = delivery.slab ? registry.parts(delivery.slab) : delivery.parts!;
          output.bytes += parts.text.length;
          const text = Buffer.from(parts.text).toString('utf8');
          output.records += text.split('\n').length - 1;
          const meta = Buffer.from(parts.meta).toString('utf8');
          blocks.set(delivery.destinationId, `${text}\n--meta--\n${meta}`);
        }
        if (delivery.slab) registry.free(delivery.slab);
      }
      return { events: result.accepted, blocks, output };
    },
  };
}

let checking = true;
const bodies = publishBodies(ACCOUNT, EVENTS_PER_REQUEST, REQUESTS);
const builds = [await load('this checkout', '.')];
if (process.env.BENCH_BASE) builds.unshift(await load('base', process.env.BENCH_BASE));

// Same blocks from both: generated event ids (ev_ + 26 characters) are masked.
const masked = (s: string) => s.replace(/ev_[0-9a-z]{26}/g, 'ev_*');
const written = { events: 0, records: 0, bytes: 0 };
for (const body of bodies) {
  const routed = builds.map((b) => b.route(body));
  written.events += routed[0].events;
  written.records += routed[0].output.records;
  written.bytes += routed[0].output.bytes;
  const outputs = routed.map((r) => r.blocks);
  for (const [destination, text] of outputs[0]) {
    for (const other of outputs.slice(1)) {
      if (masked(other.get(destination) ?? '') !== masked(text)) {
        throw new Error(`blocks for ${destination} differ between the builds`);
      }
    }
  }
  if (outputs.some((o) => o.size !== outputs[0].size)) throw new Error('destinations differ');
}
checking = false;

/** µs of this thread's CPU per event over one round. */
function round(build: Build): number {
  const n = Math.max(1, Math.round(ROUND_EVENTS / EVENTS_PER_REQUEST));
  let events = 0;
  const cpu0 = process.threadCpuUsage();
  for (let i = 0; i < n; i++) events += build.route(bodies[i % REQUESTS]).events;
  const used = process.threadCpuUsage(cpu0);
  return (used.user + used.system) / events;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(
  `${REQUESTS} requests of ${EVENTS_PER_REQUEST} events, ${(bodies[0].length / 1024).toFixed(0)} KiB each; ${ROUNDS} rounds of ${ROUND_EVENTS} events, builds alternating`,
);
console.log(
  `each event becomes ${(written.records / written.events).toFixed(2)} records, ${(written.bytes / written.events).toFixed(0)} bytes of NDJSON (both destinations)`,
);
for (let i = 0; i < 2; i++) for (const b of builds) round(b);
const times = builds.map(() => [] as number[]);
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, b] of builds.entries()) times[i].push(round(b));
}
for (const [i, b] of builds.entries()) {
  const t = times[i];
  console.log(
    `${b.name.padEnd(14)} cpu µs/event  best ${Math.min(...t).toFixed(2)}  median ${median(t).toFixed(2)}`,
  );
}
if (builds.length === 2) {
  const ratios = times[0].map((base, r) => times[1][r] / base);
  console.log(`per-round cpu ratio (this / base)  ${spreadText(spreadOf(ratios))}`);
}
