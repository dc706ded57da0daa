// Micro benchmark of the worker's per-request reading, up to routing: readPublishRequest (each
// payload's JSON text written from the wire bytes, with its spans, under the default redaction)
// and the Filterable view of every event (what filters read), against protobuf-es's fromBinary
// (the reflective decode the no-op handler of bench:pipeline does, with no JSON at all).
// Input: 500-event PublishRequests from test/helpers/events.ts (≈70% http_request_complete).
// Run: node bench/decode-micro.ts   (prints CPU µs per event of both and the ratio)
//
// Both loops run alternately for several rounds and the best round of each is reported, in CPU
// time of this thread (process.cpuUsage) and in wall time: on a shared machine the best round
// is the one least disturbed by other processes.

import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { redactObject } from '../src/data-plane/redaction/event-object.ts';
import { DEFAULT_REDACTION } from '../src/data-plane/redaction/policy.ts';
import { readPublishRequest } from '../src/data-plane/wire-json/request-text.ts';
import { type EventJson, trafficToJson } from '../src/data-plane/wire-json/to-json.ts';
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

function baseline(bytes: Uint8Array): number {
  return fromBinary(PublishRequestSchema, bytes).events.length;
}

function worker(bytes: Uint8Array): number {
  const request = readPublishRequest(bytes);
  let n = 0;
  for (let i = 0; i < request.events.length; i++) if (request.filterable(i).conn) n++;
  return n === 0 ? 0 : request.events.length;
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

const us = (perSec: number) => `${(1e6 / perSec).toFixed(2).padStart(6)} µs/event`;

// Same events: the worker's text must be the catalogue's JSON of protobuf-es's decode (under
// the default redaction), or the benchmark compares different work.
const check = requests[0];
const expected = fromBinary(PublishRequestSchema, check).events.map((e) =>
  redactObject(
    toJson[e.payload.case as keyof typeof toJson](e.payload.value as never) as EventJson,
    DEFAULT_REDACTION,
  ),
);
const read = readPublishRequest(check);
const actual = read.events.map((event) =>
  JSON.parse(
    read.text.toString('utf8', read.spans[event.spanBase], read.spans[event.spanBase + 1]),
  ),
);
if (JSON.stringify(expected) !== JSON.stringify(actual)) {
  throw new Error('readPublishRequest disagrees with fromBinary + trafficToJson');
}

console.log(
  `${REQUESTS} requests of ${EVENTS_PER_REQUEST} events, ${(requests[0].length / 1024).toFixed(0)} KiB each; best of ${ROUNDS} rounds of ${ROUND_EVENTS} events`,
);
// Warm-up: let both reach their optimized code before measuring.
for (let i = 0; i < 2; i++) {
  round(baseline);
  round(worker);
}
let base: Rate | undefined;
let mine: Rate | undefined;
const cpuRatios: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  const [b, w] = [round(baseline), round(worker)];
  cpuRatios.push(b.cpu / w.cpu);
  base = best(base, b);
  mine = best(mine, w);
}
const b = base!;
const w = mine!;
console.log(`protobuf-es fromBinary                 cpu ${us(b.cpu)}   wall ${us(b.wall)}`);
console.log(`readPublishRequest + filterable views  cpu ${us(w.cpu)}   wall ${us(w.wall)}`);
console.log(`time ratio (worker / fromBinary)       cpu ${(b.cpu / w.cpu).toFixed(2)}×`);
console.log(`per-round cpu ratio spread             ${spreadText(spreadOf(cpuRatios))}`);
