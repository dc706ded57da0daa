// Micro benchmark of the per-event catalogue and filter work: compiled CEL filters against the
// hand-written JS predicate doing the same test (the baseline), plus to-json and projection.
// Run: npx node bench/filter-micro.ts   (prints evals/s and the ratio to the baseline)

import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { type EventJson, trafficToJson } from '../src/catalogue/index.ts';
import { compileFilter, compileProjection } from '../src/filter/index.ts';
import { HttpRequestCompleteSchema } from '../src/gen/agent_ingress/events/v0/traffic_pb.ts';

const TYPE = 'http_request_complete.v0';
const N = 256;

function message(i: number) {
  return create(HttpRequestCompleteSchema, {
    conn: {
      clientIp: `10.0.${i % 256}.${i % 7}`,
      serverIp: '192.0.2.10',
      serverName: i % 3 === 0 ? 'api.example.com' : `host${i}.example.org`,
      serverPort: i % 2 === 0 ? 443 : 8080,
      startTs: timestampFromMs(1_700_000_000_000 + i),
    },
    http: {
      request: {
        method: 'get',
        bodyLength: BigInt(i),
        headers: { Accept: { values: ['*/*'] }, 'User-Agent': { values: ['curl/8'] } },
        url: {
          host: 'api.example.com',
          path: `/v1/items/${i}`,
          scheme: 'https',
          raw: '',
          query: '',
        },
      },
      response: { statusCode: 200, bodyLength: 1234n },
    },
    trafficPolicy: { logs: [{ action: 'log', n: i }] },
  });
}

// Each measurement gets a freshly generated loop, so the call site `fn(...)` stays monomorphic
// and one case's JIT feedback does not slow the next one down.
function timeLoop(fn: (e: EventJson) => unknown, events: EventJson[], iterations: number): number {
  const loop = new Function(
    'fn',
    'events',
    'n',
    'iterations',
    'let hits = 0; for (let i = 0; i < iterations; i++) if (fn(events[i % n])) hits++; return hits;',
  );
  loop(fn, events, events.length, 200_000); // warm-up
  const t0 = performance.now();
  loop(fn, events, events.length, iterations);
  return iterations / ((performance.now() - t0) / 1000);
}

function rate(
  label: string,
  fn: (e: EventJson) => unknown,
  events: EventJson[],
  baseline?: number,
) {
  const perSec = timeLoop(fn, events, 2_000_000);
  const ratio = baseline ? `  (${(perSec / baseline).toFixed(3)}× baseline)` : '';
  console.log(`${label.padEnd(58)} ${(perSec / 1e6).toFixed(2).padStart(7)} M/s${ratio}`);
  return perSec;
}

const toJson = trafficToJson(TYPE);
const messages = Array.from({ length: N }, (_, i) => message(i));
const events = messages.map((m) => toJson(m));

const cases: [string, (e: EventJson) => boolean][] = [
  ['conn.server_port == 443', (e) => (e.conn as { server_port: number }).server_port === 443],
  [
    'conn.server_port == 443 && conn.server_name.endsWith(".example.com")',
    (e) => {
      const c = e.conn as { server_port: number; server_name: string };
      return c.server_port === 443 && c.server_name.endsWith('.example.com');
    },
  ],
  [
    'conn.server_name.matches("^api\\\\.") || conn.client_ip in ["10.0.1.1", "10.0.2.2"]',
    (e) => {
      const c = e.conn as { server_name: string; client_ip: string };
      return /^api\./.test(c.server_name) || ['10.0.1.1', '10.0.2.2'].includes(c.client_ip);
    },
  ],
];

for (const [expr, js] of cases) {
  const filter = compileFilter(TYPE, expr);
  for (const e of events) {
    if (filter.matches(e) !== js(e)) throw new Error(`filter and baseline disagree on ${expr}`);
  }
  console.log(expr);
  const base = rate('  hand-written JS predicate (baseline)', js, events);
  rate('  compiled CEL filter', (e) => filter.matches(e), events, base);
}

const msgs = messages as unknown as EventJson[];
rate('to-json (decoded message → JSON object)', (m) => toJson(m), msgs);
const projection = compileProjection(TYPE, [
  'conn',
  'http.request.method',
  'http.response.status_code',
]);
rate('projection (conn, http.request.method, ...status_code)', (e) => projection(e), events);
