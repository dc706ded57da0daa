import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import autocannon from 'autocannon';
import { PublishRequestSchema } from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../test/helpers/events.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { apiClient } from '../test/helpers/service.ts';
import { startNode } from './lib/processes.ts';
import { report } from './lib/report.ts';

// Events/s end to end (Connect client → ingest → workers → file destinations, acknowledged
// when fsync'd) against a no-op Connect handler on the same stack fed the same payloads.

const EVENTS_PER_REQUEST = Number(process.env.BENCH_EVENTS_PER_REQUEST ?? 500);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const PATH = '/agent_ingress.ingest.v0.IngestService/Publish';
const INGEST_TOKEN = 'bench-ingest-token-0123456789';
const API_KEY = 'bench_bootstrap_key_0123456789abcdef';

const SUBSCRIPTIONS = [
  { filter: 'conn.server_port == 443' },
  { filter: 'conn.server_name.endsWith(".example.com")' },
  { filter: 'conn.client_ip.startsWith("10.1.") || conn.client_ip.startsWith("10.2.")' },
  { filter: 'conn.server_name.matches("^(api|shop)\\\\.") && conn.server_port != 80' },
  { filter: 'conn.server_ip in ["192.0.2.1", "192.0.2.2", "192.0.2.3"]' },
  { fields: ['conn', 'http.response.status_code'] },
  { fields: ['conn.client_ip', 'http.request.url.path', 'http.response.body_length'] },
  { fields: ['http.request'] },
  {},
  {},
];

async function load(url: string, bodies: Buffer[]) {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION_S,
    requests: bodies.map((body) => ({
      method: 'POST',
      path: PATH,
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

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-bench-'));
  const events = generateEvents(EVENTS_PER_REQUEST * 20, { accounts: ['placeholder'], seed: 3 });
  const servicePort = await freePort();
  const service = await startNode(
    'src/main.ts',
    {
      PORT: String(servicePort),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      BOOTSTRAP_API_KEY: API_KEY,
      INGEST_TOKENS: INGEST_TOKEN,
      MAX_INFLIGHT_REQUESTS: '64',
    },
    /Created account (ac_[0-9a-z]+)/,
  );
  try {
    const url = `http://127.0.0.1:${servicePort}`;
    const api = apiClient(url, API_KEY);
    const account = /Created account (ac_[0-9a-z]+)/.exec(service.output())?.[1];
    if (account === undefined)
      throw new Error(`no account in the service's output:\n${service.output()}`);
    for (const event of events) event.accountId = account;
    const destinations = [];
    for (const path of ['bench-a', 'bench-b']) {
      destinations.push(
        (await api('POST', '/event_destinations', { target: { file: { path } } })).body.id,
      );
    }
    for (const [i, subscription] of SUBSCRIPTIONS.entries()) {
      const created = await api('POST', '/event_subscriptions', {
        description: `bench ${i}`,
        sources: ['http_request_complete.v0', 'tcp_connection_closed.v0'].map((type) => ({
          type,
          filter: subscription.filter ?? '',
          fields: type === 'http_request_complete.v0' ? (subscription.fields ?? []) : [],
        })),
        destination_ids: [destinations[i % 2]],
      });
      if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    }
    const bodies: Buffer[] = [];
    for (let i = 0; i < events.length; i += EVENTS_PER_REQUEST) {
      const request = create(PublishRequestSchema, {
        events: events.slice(i, i + EVENTS_PER_REQUEST),
      });
      bodies.push(Buffer.from(toBinary(PublishRequestSchema, request)));
    }
    // Let the pipeline pick up its configuration, then warm up.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const noopPort = await freePort();
    const noop = await startNode(
      'bench/noop-server.ts',
      { PORT: String(noopPort) },
      /noop listening/,
    );
    let baseline: Awaited<ReturnType<typeof load>>;
    try {
      baseline = await load(`http://127.0.0.1:${noopPort}`, bodies);
    } finally {
      await noop.stop();
    }
    const measured = await load(url, bodies);
    const ratio = measured.eventsPerSecond / baseline.eventsPerSecond;
    report(
      {
        bench: 'pipeline',
        value: Math.round(measured.eventsPerSecond),
        unit: 'events/s',
        baseline: Math.round(baseline.eventsPerSecond),
        ratio: Number(ratio.toFixed(3)),
      },
      [
        ['events per request', EVENTS_PER_REQUEST],
        [
          'request bytes (avg)',
          Math.round(bodies.reduce((n, b) => n + b.length, 0) / bodies.length),
        ],
        ['connections / duration', `${CONNECTIONS} / ${DURATION_S} s`],
        ['no-op Connect handler, events/s', Math.round(baseline.eventsPerSecond)],
        ['pipeline (10 subscriptions → file), events/s', Math.round(measured.eventsPerSecond)],
        [
          'pipeline p50 / p99 request latency, ms',
          `${measured.latency.p50} / ${measured.latency.p99}`,
        ],
        ['ratio', ratio.toFixed(3)],
      ],
    );
  } finally {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
