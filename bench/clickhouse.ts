import { createClient } from '@clickhouse/client';
import { createLogger } from '../src/logger.ts';
import { encodeRows } from '../src/sinks/clickhouse/encode.ts';
import { parseClickHouseSinkConfig } from '../src/sinks/clickhouse/index.ts';
import { serverProfile } from '../src/sinks/clickhouse/schema.ts';
import { createClickHouseSink } from '../src/sinks/clickhouse/sink.ts';
import { tableForEventType } from '../src/sinks/clickhouse/tables.ts';
import { startClickHouse } from '../test/helpers/clickhouse.ts';
import { recordBatches } from './lib/records.ts';
import { printRateComparison, report } from './lib/report.ts';
import { alternateRounds } from './lib/rounds.ts';
import { spreadOf } from './lib/spread.ts';
import { median, ratioOf } from './lib/stats.ts';

// Rows/s of the project's ClickHouse sink (createClickHouseSink + tableForEventType; batches of
// worker-made envelope records: JSON parse, column mapping, one JSONEachRow insert per table)
// against a raw @clickhouse/client JSONEachRow insert of the identical rows into identical tables
// (DDL copied from the sink's tables with SHOW CREATE TABLE; rows precomputed with the sink's own
// encoder outside the timed section: the raw client is the floor). Same client settings. Sink
// and raw inserts alternate batch by batch; figures are medians of per-batch rows/s.

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
    const rawInserts = batches.map((batch) =>
      [...encodeRows(batch, tableForEventType, profile).values()].map(({ target, rows }) => ({
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
      // The sink's own CPU work on this batch (envelope text → rows), alone.
      afterRound: (i) => {
        const t0 = performance.now();
        encodeRows(batches[i], tableForEventType, profile);
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
    const { value, baseline } = printRateComparison(
      'rows/s',
      { label: 'project sink (createClickHouseSink)', rates: sinkRates },
      { label: 'raw @clickhouse/client insert', rates: rawRates },
    );
    process.stdout.write(
      `sink encodeRows alone (envelope text → rows), median: ${median(encodeMs).toFixed(1)} ms per batch; ` +
        `a whole batch: sink ${((BATCH / value) * 1000).toFixed(1)} ms, raw ${((BATCH / baseline) * 1000).toFixed(1)} ms\n`,
    );
    process.stdout.write(
      `rows stored: sink ${counts[0]}, raw ${counts[1]} (tables: ${tables.join(', ')})\nGoal: ratio >= 0.8.\n\n`,
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
