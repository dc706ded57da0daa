import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import {
  clickhouseDistinct,
  clickhouseIds,
  codeOf,
  eventPool,
  health,
  missing,
  publisher,
  route,
  waitDrained,
  waitRouted,
} from './support.ts';

// A destination that is down fills its spool; at the bound the service pushes back with
// RESOURCE_EXHAUSTED (retryable) instead of dropping, every acknowledged event arrives once
// the destination is back, and ingest works normally again after the spool drained.

const SPOOL_MAX_BYTES = 128 * 1024;

describe('spool full', () => {
  let dataDir: string;
  let clickhouse: ClickHouseServer;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agin-fault-spool-'));
    clickhouse = await startClickHouse();
  });
  afterAll(async () => {
    if (service?.running()) await service.stop('SIGKILL');
    await clickhouse?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers RESOURCE_EXHAUSTED at the bound, drops nothing, and serves normally once drained', async () => {
    await clickhouse.stop();
    service = await startServiceProcess({
      dataDir,
      env: { BATCH_LINGER_MS: '20', SPOOL_MAX_BYTES: String(SPOOL_MAX_BYTES) },
    });
    const accountId = service.accountId!;
    const [destinationId] = await route(
      service.api,
      [{ clickhouse: { url: clickhouse.url, table_prefix: 'full_' } }],
      [{ type: 'tcp_connection_closed.v0', fields: ['conn.client_ip', 'conn.bytes_in'] }],
    );
    const acked = await waitRouted(service.url, service.api, accountId, [destinationId]);
    const publish = publisher(service.url);

    let exhausted: unknown;
    for (let i = 0; i < 200 && exhausted === undefined; i++) {
      try {
        acked.push(...(await publish(eventPool(accountId, 50, i))).eventIds);
      } catch (error) {
        exhausted = error;
      }
    }
    expect(exhausted, 'the spool never filled').toBeDefined();
    expect(codeOf(exhausted)).toBe(Code.ResourceExhausted);
    // Still full: every further request is pushed back the same way, none half-accepted.
    for (let i = 0; i < 3; i++) {
      await expect(publish(eventPool(accountId, 50, 300 + i))).rejects.toMatchObject({
        code: Code.ResourceExhausted,
      });
    }
    const full = await health(service.api, destinationId);
    expect(full.status).toBe('retrying');
    expect(full.backlog.bytes).toBeLessThanOrEqual(SPOOL_MAX_BYTES);
    expect(full.backlog.events).toBeGreaterThanOrEqual(acked.length);
    console.log(
      `spool full: ${acked.length} events acknowledged, backlog ${full.backlog.events} events / ${full.backlog.bytes} bytes`,
    );

    await clickhouse.start();
    await waitDrained(service.api, destinationId, 60_000);
    const table = 'full_tcp_connection_closed_v0';
    expect(missing(acked, await clickhouseIds(clickhouse, table))).toBe('');

    // Normal service again: requests are acknowledged and written straight through.
    const after: string[] = [];
    for (let i = 0; i < 10; i++)
      after.push(...(await publish(eventPool(accountId, 50, 400 + i))).eventIds);
    const ok = await health(service.api, destinationId);
    expect(ok.status).toBe('ok');
    expect(ok.backlog.events).toBe(0);
    expect(missing(after, await clickhouseIds(clickhouse, table))).toBe('');
    expect(await clickhouseDistinct(clickhouse, table)).toBeGreaterThanOrEqual(
      acked.length + after.length,
    );
    expect((await service.stop()).code).toBe(0);
  }, 120_000);
});
