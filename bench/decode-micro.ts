// Micro benchmark of the worker's per-request decoding: protobuf-es's fromBinary followed by the
// catalogue's trafficToJson per event (the baseline, what route-events.ts does today) against
// the generated wire decoder (src/data-plane/wire-json/wire-decode.ts) producing the same JSON directly.
// Input: 500-event PublishRequests from test/helpers/events.ts (≈70% http_request_complete).
// Run: npx node bench/decode-micro.ts   (prints events/s of both and the ratio)
//
// Both loops run alternately for several rounds and the best round of each is reported, in CPU
// time of this thread (process.cpuUsage) and in wall time: on a shared machine the best round
// is the one least disturbed by other processes.

import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { type EventJson, trafficToJson } from '../src/data-plane/wire-json/to-json.ts';
import { decodePublishRequest } from '../src/data-plane/wire-json/wire-decode.ts';
import { PublishRequestSchema } from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../test/helpers/events.ts';
import { spreadOf, spreadText } from './lib/spread.ts';

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 500);
const REQUESTS = 16;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const ROUND_EVENTS = Number(process.env.BENCH_ROUND_EVENTS ?? 200_000);

const requests = Array.from({ length: REQUESTS }, (_, seed) =>
  toBinary(
    PublishRequestSchema,
    create(PublishRequestSchema, {
      events: generateEvents(EVENTS_PER_REQUEST, {
        accounts: ['ac_bench_1', 'ac_bench_2', 'ac_bench_3'],
        seed: seed + 1,
      }),
    }),
  ),
);

const toJson = {
  httpRequestComplete: trafficToJson('http_request_complete.v0'),
  tcpConnectionClosed: trafficToJson('tcp_connection_closed.v0'),
};

// What route-events.ts does today per request, up to the JSON objects.
function baseline(bytes: Uint8Array): number {
  const { events } = fromBinary(PublishRequestSchema, bytes);
  let fields = 0;
  for (const event of events) {
    const payload = event.payload as {
      case: keyof typeof toJson;
      value: Parameters<(typeof toJson)[keyof typeof toJson]>[0];
    };
    const object: EventJson = toJson[payload.case](payload.value);
    if (object.conn !== undefined) fields++;
  }
  return fields;
}

function generated(bytes: Uint8Array): number {
  let fields = 0;
  for (const event of decodePublishRequest(bytes)) if (event.object?.conn !== undefined) fields++;
  return fields;
}

interface Rate {
  cpu: number;
  wall: number;
}

function round(decode: (bytes: Uint8Array) => number): Rate {
  const n = Math.max(1, Math.round(ROUND_EVENTS / EVENTS_PER_REQUEST));
  let events = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) events += decode(requests[i % REQUESTS]);
  const wall = (performance.now() - t0) / 1000;
  const cpuUsed = process.cpuUsage(cpu0);
  const cpu = (cpuUsed.user + cpuUsed.system) / 1e6;
  return { cpu: events / cpu, wall: events / wall };
}

function best(a: Rate | undefined, b: Rate): Rate {
  return a === undefined ? b : { cpu: Math.max(a.cpu, b.cpu), wall: Math.max(a.wall, b.wall) };
}

const fmt = (perSec: number) => `${(perSec / 1000).toFixed(0).padStart(6)} k events/s`;
const us = (perSec: number) => `${(1e6 / perSec).toFixed(2).padStart(6)} µs/event`;

// Same events, same JSON: a benchmark of different work would be worthless.
const check = requests[0];
const expected = fromBinary(PublishRequestSchema, check).events.map((e) =>
  toJson[e.payload.case as keyof typeof toJson](e.payload.value as never),
);
const actual = decodePublishRequest(check).map((e) => e.object);
if (JSON.stringify(expected) !== JSON.stringify(actual)) {
  throw new Error('the generated decoder disagrees with fromBinary + trafficToJson');
}

console.log(
  `${REQUESTS} requests of ${EVENTS_PER_REQUEST} events, ${(requests[0].length / 1024).toFixed(0)} KiB each; best of ${ROUNDS} rounds of ${ROUND_EVENTS} events`,
);
// Warm-up: let both reach their optimized code before measuring.
for (let i = 0; i < 2; i++) {
  round(baseline);
  round(generated);
}
let base: Rate | undefined;
let gen: Rate | undefined;
const cpuRatios: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  const [b, g] = [round(baseline), round(generated)];
  cpuRatios.push(g.cpu / b.cpu);
  base = best(base, b);
  gen = best(gen, g);
}
const b = base!;
const g = gen!;
console.log(
  `fromBinary + trafficToJson   cpu ${fmt(b.cpu)} ${us(b.cpu)}   wall ${fmt(b.wall)} ${us(b.wall)}`,
);
console.log(
  `decodePublishRequest         cpu ${fmt(g.cpu)} ${us(g.cpu)}   wall ${fmt(g.wall)} ${us(g.wall)}`,
);
console.log(
  `ratio                        cpu ${(g.cpu / b.cpu).toFixed(2)}×   wall ${(g.wall / b.wall).toFixed(2)}×`,
);
console.log(`cpu ratio spread             ${spreadText(spreadOf(cpuRatios))}`);
