import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import {
  clickhouseDistinct,
  clickhouseIds,
  eventPool,
  missing,
  publisher,
  readFileDestination,
  route,
  startLoad,
  waitRouted,
} from './support.ts';

// SIGTERM under load: the process stops accepting at once, lets the requests in flight finish
// (their events lingering in batchers are flushed, not dropped), and exits 0 in time; every
// event it acknowledged is in its destinations.

const SHUTDOWN_TIMEOUT_MS = 20_000;
// A long linger keeps acknowledged-to-be events in the batchers when the signal arrives.
const LINGER_MS = 600;

/** True when a TCP connection to the port is refused (nothing listens). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

describe('SIGTERM under load', () => {
  let dataDir: string;
  let clickhouse: ClickHouseServer;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agin-fault-term-'));
    clickhouse = await startClickHouse();
  });
  afterAll(async () => {
    if (service?.running()) await service.stop('SIGKILL');
    await clickhouse?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stops accepting, drains in-flight requests, flushes every batcher and exits 0', async () => {
    service = await startServiceProcess({
      dataDir,
      env: {
        BATCH_LINGER_MS: String(LINGER_MS),
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      },
    });
    const accountId = service.accountId!;
    const [fileId, clickhouseId] = await route(
      service.api,
      [
        { file: { path: 'drain' } },
        { clickhouse: { url: clickhouse.url, table_prefix: 'drain_' } },
      ],
      [{ type: 'tcp_connection_closed.v0', fields: ['conn.client_ip', 'conn.bytes_in'] }],
    );
    // The requests in flight at the signal carry http events to destinations of their own, so
    // their batches open when they arrive and linger past the signal.
    const [inFlightFileId, inFlightClickhouseId] = await route(
      service.api,
      [
        { file: { path: 'drain-in-flight' } },
        { clickhouse: { url: clickhouse.url, table_prefix: 'drain_' } },
      ],
      [{ type: 'http_request_complete.v0', fields: ['conn.client_ip', 'http.response'] }],
    );
    const probes = [
      ...(await waitRouted(service.url, service.api, accountId, [fileId, clickhouseId])),
      ...(await waitRouted(
        service.url,
        service.api,
        accountId,
        [inFlightFileId, inFlightClickhouseId],
        { tcpShare: 0 },
      )),
    ];

    const load = startLoad({ url: service.url, accountId, clients: 4, perRequest: 100 });
    await load.waitAcked(2_000, 30_000);
    const inFlight = Array.from({ length: 3 }, (_, i) =>
      publisher(service!.url)(eventPool(accountId, 20, 500 + i, 0)).then(
        (response) => ({ at: Date.now(), ids: response.eventIds }),
        (error: unknown) => ({ at: Date.now(), error }),
      ),
    );
    await sleep(100);
    const signalledAt = Date.now();
    const exit = service.stop('SIGTERM', SHUTDOWN_TIMEOUT_MS + 10_000);

    // The listener closes at once, while the drain is still going on.
    await sleep(150);
    expect(await refused(service.port)).toBe(true);
    expect(service.running(), 'still draining when the listener is gone').toBe(true);
    let late: unknown;
    try {
      await publisher(service.url)(eventPool(accountId, 1, 1), 5_000);
    } catch (error) {
      late = error;
    }
    expect(late, 'a request after SIGTERM must fail').toBeDefined();

    const { code, signal, ms } = await exit;
    await load.stop();
    const drained = await Promise.all(inFlight);
    console.log(
      `sigterm: exit ${code} after ${ms} ms; ${load.acked().length} acked under load, ` +
        `${load.failures.length} failures after the signal`,
    );
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(ms).toBeLessThan(SHUTDOWN_TIMEOUT_MS);

    // Requests in flight at the signal were answered OK (drained), not cut off.
    for (const result of drained) {
      expect(result, `in-flight request: ${String((result as any).error)}`).toHaveProperty('ids');
      expect(result.at).toBeGreaterThan(signalledAt);
    }
    // No failure before the signal. After it: "unavailable" (503 while closing, connection
    // refused), or a keep-alive socket the closing server shut just as the client reused it
    // (EPIPE/ECONNRESET: the request never reached the service; connect-node calls it internal).
    expect(load.failures.filter((f) => f.at < signalledAt)).toEqual([]);
    const unexpected = load.failures.filter(
      (f) => f.code !== Code.Unavailable && !/EPIPE|ECONNRESET|socket hang up/.test(f.message),
    );
    expect(unexpected).toEqual([]);

    const acked = [
      ...probes,
      ...load.acked(),
      ...drained.flatMap((result) => ('ids' in result ? result.ids : [])),
    ];
    const files = [
      readFileDestination(join(dataDir, 'events', accountId, 'drain')),
      readFileDestination(join(dataDir, 'events', accountId, 'drain-in-flight')),
    ];
    for (const file of files) {
      expect(file.openFiles, 'a clean shutdown finishes the open file').toEqual([]);
      expect(file.badLines).toBe(0);
    }
    expect(
      missing(
        acked,
        files.flatMap((file) => file.ids),
      ),
    ).toBe('');

    const tables = ['drain_tcp_connection_closed_v0', 'drain_http_request_complete_v0'];
    const stored = (await Promise.all(tables.map((t) => clickhouseIds(clickhouse, t)))).flat();
    expect(missing(acked, stored)).toBe('');
    const distinct = await Promise.all(tables.map((t) => clickhouseDistinct(clickhouse, t)));
    expect(distinct[0] + distinct[1]).toBeGreaterThanOrEqual(new Set(acked).size);
  }, 120_000);
});
