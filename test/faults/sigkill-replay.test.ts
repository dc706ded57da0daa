import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import {
  clickhouseDistinct,
  clickhouseIds,
  eventPool,
  health,
  missing,
  publisher,
  readFileDestination,
  route,
  startLoad,
  until,
  waitDrained,
  waitRouted,
} from './support.ts';

// SIGKILL: nothing runs on the way down, so what was acknowledged must already be on disk —
// in the spool of a destination that is down, or fsync'd in a file destination's open file —
// and a restart on the same DATA_DIR must deliver it.

const FIELDS = ['conn.client_ip', 'conn.bytes_out'];

describe('SIGKILL and restart on the same DATA_DIR', () => {
  const dirs: string[] = [];
  const running: ServiceProcess[] = [];
  let clickhouse: ClickHouseServer;

  function dataDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'agin-fault-kill-'));
    dirs.push(dir);
    return dir;
  }
  async function start(options: Parameters<typeof startServiceProcess>[0]) {
    const service = await startServiceProcess(options);
    running.push(service);
    return service;
  }

  beforeAll(async () => {
    clickhouse = await startClickHouse();
  });
  afterAll(async () => {
    await Promise.all(running.filter((s) => s.running()).map((s) => s.stop('SIGKILL')));
    await clickhouse?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('replays the spool of a ClickHouse destination that was down when the process was killed', async () => {
    await clickhouse.stop();
    const first = await start({ dataDir: dataDir(), env: { BATCH_LINGER_MS: '20' } });
    const accountId = first.accountId!;
    const [destinationId] = await route(
      first.api,
      [{ clickhouse: { url: clickhouse.url, table_prefix: 'replay_' } }],
      [{ type: 'tcp_connection_closed.v0', fields: FIELDS }],
    );
    const acked = await waitRouted(first.url, first.api, accountId, [destinationId]);
    const publish = publisher(first.url);
    for (let i = 0; i < 20; i++)
      acked.push(...(await publish(eventPool(accountId, 100, i))).eventIds);

    const before = await health(first.api, destinationId);
    expect(before.status).toBe('retrying');
    expect(before.last_error).toEqual(expect.any(String));
    expect(before.backlog.events).toBeGreaterThanOrEqual(acked.length);

    expect((await first.stop('SIGKILL')).signal).toBe('SIGKILL');
    const spoolDir = join(first.options.dataDir, 'spool', destinationId);
    expect(readdirSync(spoolDir).filter((name) => name.endsWith('.batch')).length).toBeGreaterThan(
      0,
    );

    await clickhouse.start();
    const second = await first.restart();
    running.push(second);
    await waitDrained(second.api, destinationId, 60_000);

    const table = 'replay_tcp_connection_closed_v0';
    expect(missing(acked, await clickhouseIds(clickhouse, table))).toBe('');
    expect(await clickhouseDistinct(clickhouse, table)).toBeGreaterThanOrEqual(acked.length);
    expect(readdirSync(spoolDir).filter((name) => name.endsWith('.batch'))).toEqual([]);
    expect((await second.stop()).code).toBe(0);
  }, 120_000);

  it('keeps every event a file destination acknowledged when killed under load, and finishes its open file', async () => {
    const first = await start({ dataDir: dataDir(), env: { BATCH_LINGER_MS: '5' } });
    const accountId = first.accountId!;
    const [destinationId] = await route(
      first.api,
      [{ file: { path: 'crash' } }],
      [{ type: 'tcp_connection_closed.v0', fields: FIELDS }],
    );
    const probe = await waitRouted(first.url, first.api, accountId, [destinationId]);
    const load = startLoad({ url: first.url, accountId, clients: 3, perRequest: 100 });
    await load.waitAcked(3_000, 30_000);
    expect((await first.stop('SIGKILL')).signal).toBe('SIGKILL');
    await load.stop();
    const acked = [...probe, ...load.acked()];

    // On disk at the kill: every acknowledged event, in the file still named `.open`.
    const dir = join(first.options.dataDir, 'events', accountId, 'crash');
    const atKill = readFileDestination(dir);
    expect(atKill.openFiles.length).toBeGreaterThan(0);
    expect(missing(acked, atKill.ids)).toBe('');

    // The restart finishes the file left open (trimmed to its last whole line) by itself,
    // without waiting for the destination's next event.
    const second = await first.restart();
    running.push(second);
    const recovered = await until(
      'the .open file finished after the restart',
      () => {
        const contents = readFileDestination(dir);
        return contents.openFiles.length === 0 ? contents : undefined;
      },
      15_000,
    );
    expect(recovered.badLines).toBe(0);
    expect(missing(acked, recovered.ids)).toBe('');

    // And the destination goes on delivering.
    const after = (await publisher(second.url)(eventPool(accountId, 50, 77))).eventIds;
    expect((await second.stop()).code).toBe(0);
    expect(missing(after, readFileDestination(dir).ids)).toBe('');
  }, 120_000);
});
