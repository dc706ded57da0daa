import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { PublishRequestSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../../test/helpers/events.ts';
import { freePort } from '../../test/helpers/free-port.ts';
import { apiClient } from '../../test/helpers/service.ts';
import { type Child, startNode } from './processes.ts';

// The service as bench:pipeline runs it (`node src/main.ts`, file destinations, the same 10
// subscriptions), shared by the latency and soak benchmarks; the no-op Connect handler and the
// floor server, its baselines.

export const PUBLISH_PATH = '/agent_ingress.ingest.v0.IngestService/Publish';
export const INGEST_TOKEN = 'bench-ingest-token-0123456789';
export const API_KEY = 'bench_bootstrap_key_0123456789abcdef';
const ACCOUNT_LINE = /Created account (ac_[0-9a-z]+)/;

/** Five filtered, three projected and two catch-all subscriptions, as in bench/pipeline.ts. */
export const SUBSCRIPTIONS: { filter?: string; fields?: string[] }[] = [
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

/** A running service with its subscriptions in place. */
export interface BenchService {
  url: string;
  pid: number;
  account: string;
  /** SUBSCRIPTIONS' ids, in order. */
  subscriptionIds: string[];
  /** The bootstrap API key, for REST calls (a tap). */
  apiKey: string;
  dataDir: string;
  child: Child;
  /** Stops the service and deletes its DATA_DIR. */
  stop(): Promise<void>;
}

/**
 * Starts the service on a fresh DATA_DIR with two file destinations and SUBSCRIPTIONS, and waits
 * for the pipeline to pick up the configuration. `env` adds to the service's environment (the
 * bench's own environment is passed through too, so BATCH_LINGER_MS=… npm run … works).
 */
export async function startBenchService(env: Record<string, string> = {}): Promise<BenchService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-bench-'));
  const port = await freePort();
  let child: Child;
  try {
    child = await startNode(
      'src/main.ts',
      {
        PORT: String(port),
        DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        BOOTSTRAP_API_KEY: API_KEY,
        INGEST_TOKENS: INGEST_TOKEN,
        MAX_INFLIGHT_REQUESTS: '64',
        ...env,
      },
      ACCOUNT_LINE,
    );
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true, maxRetries: 5 });
    throw err;
  }
  const stop = async () => {
    await child.stop();
    rmSync(dataDir, { recursive: true, force: true, maxRetries: 5 });
  };
  try {
    const url = `http://127.0.0.1:${port}`;
    const api = apiClient(url, API_KEY);
    const account = ACCOUNT_LINE.exec(child.output())?.[1];
    if (account === undefined) throw new Error(`no account in the output:\n${child.output()}`);
    const destinations: string[] = [];
    const subscriptionIds: string[] = [];
    for (const path of ['bench-a', 'bench-b']) {
      const created = await api('POST', '/event_destinations', { target: { file: { path } } });
      if (created.status !== 201) throw new Error(JSON.stringify(created.body));
      destinations.push(created.body.id);
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
      subscriptionIds.push(created.body.id);
    }
    // Let the pipeline pick up its configuration.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const pid = child.process.pid!;
    return { url, pid, account, subscriptionIds, apiKey: API_KEY, dataDir, child, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** `requests` binary PublishRequests of `eventsPerRequest` generated events for `account`. */
export function publishBodies(account: string, eventsPerRequest: number, requests = 20): Buffer[] {
  const events = generateEvents(eventsPerRequest * requests, { accounts: [account], seed: 3 });
  const bodies: Buffer[] = [];
  for (let i = 0; i < events.length; i += eventsPerRequest) {
    const request = create(PublishRequestSchema, {
      events: events.slice(i, i + eventsPerRequest),
    });
    bodies.push(Buffer.from(toBinary(PublishRequestSchema, request)));
  }
  return bodies;
}

/** Starts a baseline server script of bench/ that prints "<name> listening"; its URL and handle. */
async function startBaseline(name: string): Promise<{ url: string; child: Child }> {
  const port = await freePort();
  const ready = new RegExp(`${name} listening`);
  const child = await startNode(`bench/${name}-server.ts`, { PORT: String(port) }, ready);
  return { url: `http://127.0.0.1:${port}`, child };
}

/** Starts bench/noop-server.ts (same stack, Publish decodes and does nothing else). */
export const startNoop = () => startBaseline('noop');

/** Starts bench/floor-server.ts (the same HTTP server reading the body, answering undecoded). */
export const startFloor = () => startBaseline('floor');
