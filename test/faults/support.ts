import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { type Event, IngestService } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import type { ClickHouseServer } from '../helpers/clickhouse.ts';
import { generateEvents } from '../helpers/events.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import type { ApiClient } from '../helpers/service.ts';

// Shared by the fault-injection tests: publishers with per-call deadlines, a concurrent load
// that records what was acknowledged, readers of what each kind of destination holds, and
// polling helpers. Nothing here talks to the service other than through its public APIs.

/** Polls `check` until it returns a value other than undefined/false; throws with `what` on timeout. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what}: not reached in ${timeoutMs} ms${last ? ` (last error: ${last})` : ''}`,
      );
    }
    await sleep(intervalMs);
  }
}

/** Publish with the ingest token and a deadline, as an edge proxy would. */
export function publisher(url: string) {
  const client = createClient(
    IngestService,
    createConnectTransport({ baseUrl: url, httpVersion: '1.1' }),
  );
  const headers = { authorization: `Bearer ${TEST_INGEST_TOKEN}` };
  return (events: Event[], timeoutMs = 30_000) =>
    client.publish({ events }, { headers, timeoutMs });
}

/** The Connect code of a failed call (Unknown for anything that is not a ConnectError). */
export function codeOf(error: unknown): Code {
  return error instanceof ConnectError ? error.code : ConnectError.from(error).code;
}

/** Event sizes the tests use: tcp events are small, which keeps spools and topics small. */
export function eventPool(accountId: string, count: number, seed: number, tcpShare = 1): Event[] {
  return generateEvents(count, { accounts: [accountId], tcpShare, seed });
}

/** One acknowledged request: when its answer arrived and the ids it acknowledged. */
export interface Ack {
  at: number;
  ids: string[];
}

/** One failed request: when, its Connect code and message. */
export interface Failure {
  at: number;
  code: Code;
  message: string;
}

/** A running concurrent load. */
export interface Load {
  readonly acks: Ack[];
  readonly failures: Failure[];
  /** Every acknowledged event id so far. */
  acked(): string[];
  /** Resolves once at least `n` events are acknowledged in all. */
  waitAcked(n: number, timeoutMs: number): Promise<void>;
  /** Stops the loops after their current request and waits for them to end. */
  stop(): Promise<void>;
}

/** What startLoad runs: `clients` loops, each publishing `perRequest` events per call. */
export interface LoadOptions {
  url: string;
  accountId: string;
  clients: number;
  perRequest: number;
  seed?: number;
  tcpShare?: number;
  /** Pause between requests of one loop (default 0). */
  pauseMs?: number;
  /** A loop ends at its first failure (default: it pauses 100 ms and goes on). */
  stopOnError?: boolean;
  timeoutMs?: number;
}

/** Starts the loops at once; every acknowledgement and failure is recorded with its time. */
export function startLoad(options: LoadOptions): Load {
  const acks: Ack[] = [];
  const failures: Failure[] = [];
  let stopped = false;
  const publish = publisher(options.url);
  const loops = Array.from({ length: options.clients }, async (_, client) => {
    const pool = eventPool(
      options.accountId,
      options.perRequest * 8,
      (options.seed ?? 1) * 100 + client,
      options.tcpShare ?? 1,
    );
    for (let i = 0; !stopped; i++) {
      const start = (i % 8) * options.perRequest;
      try {
        const response = await publish(
          pool.slice(start, start + options.perRequest),
          options.timeoutMs,
        );
        acks.push({ at: Date.now(), ids: response.eventIds });
      } catch (error) {
        failures.push({
          at: Date.now(),
          code: codeOf(error),
          message: error instanceof Error ? error.message : String(error),
        });
        if (options.stopOnError) return;
        await sleep(100);
      }
      if (options.pauseMs) await sleep(options.pauseMs);
    }
  });
  const acked = () => acks.flatMap((ack) => ack.ids);
  return {
    acks,
    failures,
    acked,
    waitAcked: (n, timeoutMs) =>
      until(
        `${n} events acknowledged`,
        () => acks.reduce((k, a) => k + a.ids.length, 0) >= n,
        timeoutMs,
        50,
      ).then(() => undefined),
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** The health of a destination as GET /event_destinations/{id} shows it. */
export async function health(api: ApiClient, id: string): Promise<any> {
  const response = await api('GET', `/event_destinations/${id}`);
  if (response.status !== 200) throw new Error(`GET ${id}: ${response.status}`);
  return response.body.health;
}

/** Creates the destinations and one subscription delivering `sources` to all of them. */
export async function route(
  api: ApiClient,
  targets: object[],
  sources: object[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const target of targets) {
    const created = await api('POST', '/event_destinations', { target });
    if (created.status !== 201) {
      throw new Error(
        `POST /event_destinations: ${created.status} ${JSON.stringify(created.body)}`,
      );
    }
    ids.push(created.body.id);
  }
  const subscription = await api('POST', '/event_subscriptions', {
    sources,
    destination_ids: ids,
  });
  if (subscription.status !== 201) {
    throw new Error(
      `POST /event_subscriptions: ${subscription.status} ${JSON.stringify(subscription.body)}`,
    );
  }
  return ids;
}

/**
 * Publishes one-event probes until every destination shows it took one (a success or a
 * backlog): from then on the routing of the new subscription is live. Returns the last probe's
 * id, which was routed and acknowledged, so it must arrive like any other event (earlier probes
 * may have been acknowledged before the routing was live, with nowhere to go).
 */
export async function waitRouted(
  url: string,
  api: ApiClient,
  accountId: string,
  destinationIds: string[],
  options: { timeoutMs?: number; tcpShare?: number } = {},
): Promise<string[]> {
  const publish = publisher(url);
  const probe = eventPool(accountId, 1, 999, options.tcpShare ?? 1);
  let ids: string[] = [];
  await until(
    'routing of the new subscription',
    async () => {
      ids = (await publish(probe)).eventIds;
      for (const id of destinationIds) {
        const h = await health(api, id);
        if (h === undefined || (h.last_success_at === null && h.backlog.events === 0)) return false;
      }
      return true;
    },
    options.timeoutMs ?? 30_000,
    200,
  );
  return ids;
}

/** Waits until the destination is `ok` with an empty spool. */
export async function waitDrained(api: ApiClient, id: string, timeoutMs: number): Promise<void> {
  await until(
    `destination ${id} drained`,
    async () => {
      const h = await health(api, id);
      return h?.status === 'ok' && h.backlog.events === 0;
    },
    timeoutMs,
  );
}

/** What a file destination's directory holds: every line's event id, and the file names. */
export interface FileContents {
  ids: string[];
  files: string[];
  openFiles: string[];
  /** Lines that do not parse as JSON (a torn write that recovery did not trim). */
  badLines: number;
}

/** Reads every file of a file destination's directory, `.open` ones included. */
export function readFileDestination(dir: string): FileContents {
  const out: FileContents = { ids: [], files: [], openFiles: [], badLines: 0 };
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    (name.endsWith('.open') ? out.openFiles : out.files).push(name);
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (line === '') continue;
      try {
        out.ids.push(JSON.parse(line).event_id);
      } catch {
        out.badLines++;
      }
    }
  }
  return out;
}

/** Every event_id in a ClickHouse table (none when the table does not exist yet). */
export async function clickhouseIds(
  clickhouse: ClickHouseServer,
  table: string,
): Promise<string[]> {
  try {
    const body = await clickhouse.query(
      `SELECT event_id FROM default.${table} FORMAT TabSeparated`,
    );
    return body.split('\n').filter((line) => line !== '');
  } catch (error) {
    if (/Code: 60\b/.test(String(error))) return [];
    throw error;
  }
}

/** `SELECT uniqExact(event_id)` of a ClickHouse table. */
export async function clickhouseDistinct(
  clickhouse: ClickHouseServer,
  table: string,
): Promise<number> {
  const body = await clickhouse.query(
    `SELECT uniqExact(event_id) FROM default.${table} FORMAT TabSeparated`,
  );
  return Number(body.trim());
}

/**
 * The acknowledged ids missing from `present`, as one line for a failure message: '' when every
 * one arrived, else "N of M acknowledged events missing (first: …)".
 */
export function missing(acked: readonly string[], present: Iterable<string>): string {
  const have = new Set(present);
  const lost = acked.filter((id) => !have.has(id));
  if (lost.length === 0) return '';
  return `${lost.length} of ${acked.length} acknowledged events missing (first: ${lost.slice(0, 3).join(', ')})`;
}

/** An HTTP proxy in front of a server that counts the requests it forwards. */
export interface CountingProxy {
  url: string;
  requests(): number;
  close(): Promise<void>;
}

/** Forwards every request to `target` (method, path, headers, body) and counts them. */
export async function countingProxy(target: string): Promise<CountingProxy> {
  const upstream = new URL(target);
  let count = 0;
  const server: Server = createServer((req, res) => {
    count++;
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
