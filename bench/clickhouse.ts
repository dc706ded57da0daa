import { createClient } from '@clickhouse/client';
import { parseClickHouseSinkConfig } from '../src/data-plane/sinks/clickhouse/config.ts';
import { byTable, encodeRowBinary } from '../src/data-plane/sinks/clickhouse/encode.ts';
import { serverProfile } from '../src/data-plane/sinks/clickhouse/schema.ts';
import { createClickHouseSink } from '../src/data-plane/sinks/clickhouse/sink.ts';
import { tableForEventType } from '../src/data-plane/sinks/clickhouse/tables.ts';
import { createLogger } from '../src/shared/logger.ts';
import { startClickHouse } from '../test/helpers/clickhouse.ts';
import { jsonEachRowRows } from '../test/helpers/clickhouse-json-rows.ts';
import { recordBatches } from './lib/records.ts';
import { printRateComparison, report } from './lib/report.ts';
import { alternateRounds } from './lib/rounds.ts';
import { spreadOf } from './lib/spread.ts';
import { median, ratioOf } from './lib/stats.ts';

// Rows/s of the project's ClickHouse sink (createClickHouseSink + tableForEventType; batches of
// worker-made envelope records: split by table, RowBinary encoded in the sink's worker thread,
// one `INSERT … FORMAT RowBinary` per table) against a raw @clickhouse/client JSONEachRow insert
// (`client.insert`, the client's own format) of the same rows into identical tables (DDL copied
// from the sink's tables with SHOW CREATE TABLE), batch for batch the same records. The raw
// client's rows are made outside the timed section (the reference mapping the sink's JSON path
// used): it is handed them ready-made. Same client settings. Sink and raw inserts alternate
// batch by batch; figures are medians of per-batch rows/s.

const BATCH = Number(process.env.BENCH_BATCH ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const WARMUP = 2;

async function main(): Promise<void> {
  const server = await startClickHouse();
  const settings = { url: server.url, database: 'bench_sink' };
  const sink = createClickHouseSink({
    config: parseClickHouseSinkConfig(settings),
    tableFor: tableForEventType,
    logger: createLogger('silent'),
  });
  const config = parseClickHouseSinkConfig(settings);
  const raw = createClient({
    url: config.url,
    username: config.user,
    password: config.password,
    request_timeout: config.requestTimeoutMs,
    compression: { request: config.requestCompression, response: false },
    application: 'agent-ingress-bench',
  });
  try {
    const batches = recordBatches(BATCH, WARMUP + ROUNDS);
    // The sink's first write creates its database and tables; copy their DDL for the raw ones.
    await sink.write(batches[0]);
    await server.query('CREATE DATABASE IF NOT EXISTS bench_raw');
    const tables = (await server.query('SHOW TABLES FROM bench_sink')).trim().split('\n');
    for (const table of tables) {
      const ddl = (
        await server.query(`SHOW CREATE TABLE bench_sink.${table} FORMAT TabSeparatedRaw`)
      ).trim();
      await server.query(ddl.replace(`bench_sink.${table}`, `bench_raw.${table}`));
    }
    const profile = serverProfile(server.version);
    const tableTypes = new Map<string, string[]>();
    for (const table of tables) {
      const target = tableForEventType(table.replace(/_v0$/, '.v0'))!;
      const text = await server.query(
        `SELECT name, type FROM system.columns WHERE database = 'bench_sink' AND table = '${table}' FORMAT TabSeparated`,
      );
      const types = new Map(
        text
          .trim()
          .split('\n')
          .map((line) => line.split('\t') as [string, string]),
      );
      tableTypes.set(
        table,
        target.columns.map((c) => types.get(c.name)!),
      );
    }
    const rawInserts = batches.map((batch) =>
      [...jsonEachRowRows(batch, tableForEventType, profile).values()].map(({ target, rows }) => ({
        table: `bench_raw.${target.table}`,
        rows,
      })),
    );
    const insertRaw = async (i: number) => {
      for (const { table, rows } of rawInserts[i]) {
        await raw.insert({ table, values: rows, format: 'JSONEachRow' });
      }
    };
    await insertRaw(0);
    await sink.write(batches[1]);
    await insertRaw(1);

    const encodeMs: number[] = [];
    const { projectRates: sinkRates, baselineRates: rawRates } = await alternateRounds({
      rounds: ROUNDS,
      start: WARMUP,
      batchSize: BATCH,
      project: (i) => sink.write(batches[i]),
      baseline: insertRaw,
      // The sink's own CPU work on this batch (envelope text → RowBinary), alone, on this thread.
      afterRound: (i) => {
        const t0 = performance.now();
        for (const { target, jsons } of byTable(batches[i], tableForEventType).values()) {
          const types = tableTypes.get(target.table)!;
          encodeRowBinary({ columns: target.columns, types, jsons }, profile);
        }
        encodeMs.push(performance.now() - t0);
      },
    });

    const counts: string[] = [];
    for (const db of ['bench_sink', 'bench_raw']) {
      const n = tables.map(async (t) =>
        Number(await server.query(`SELECT count() FROM ${db}.${t}`)),
      );
      counts.push((await Promise.all(n)).join(' + '));
    }
    if (counts[0] !== counts[1])
      throw new Error(`row counts differ: sink ${counts[0]}, raw ${counts[1]}`);

    const avgBytes = batches.reduce((n, b) => n + b.bytes, 0) / batches.length;
    process.stdout.write(
      `ClickHouse ${server.version}; ${ROUNDS} batches of ${BATCH} records each way (${(avgBytes / 2 ** 20).toFixed(2)} MiB of envelopes per batch), alternating\n\n`,
    );
    const k = (n: number) => Math.round(n);
    const { value, baseline, pairedRatio } = printRateComparison(
      'rows/s',
      { label: 'project sink (createClickHouseSink)', rates: sinkRates },
      { label: 'raw @clickhouse/client insert', rates: rawRates },
    );
    const ratios = sinkRates.map((v, i) => v / rawRates[i]);
    process.stdout.write(
      `per-round ratios: min ${Math.min(...ratios).toFixed(3)}, median ${pairedRatio.toFixed(3)}, max ${Math.max(...ratios).toFixed(3)}\n`,
    );
    process.stdout.write(
      `sink encodeRowBinary alone (envelope text → RowBinary, one thread), median: ${median(encodeMs).toFixed(1)} ms per batch; ` +
        `a whole batch: sink ${((BATCH / value) * 1000).toFixed(1)} ms, raw ${((BATCH / baseline) * 1000).toFixed(1)} ms\n`,
    );
    process.stdout.write(
      `rows stored: sink ${counts[0]}, raw ${counts[1]} (tables: ${tables.join(', ')})\nGoal: ratio >= 1.5.\n\n`,
    );
    report(
      {
        bench: 'clickhouse',
        value: k(value),
        unit: 'rows/s',
        baseline: k(baseline),
        ratio: ratioOf(value, baseline),
        spread: spreadOf(sinkRates.map((rate, i) => rate / rawRates[i])),
      },
      [],
    );
  } finally {
    await sink.close();
    await raw.close();
    await server.close();
  }
}

await main();
