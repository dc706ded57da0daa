import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/helpers/free-port.ts';
import { startNode } from './lib/processes.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median, percentile, ratioOf } from './lib/stats.ts';

// Time from spawning `node src/main.ts` to its "listening" line, on a first start (fresh
// DATA_DIR: PGlite runs initdb, migrations, first API key) and on a restart (same DATA_DIR),
// against the same two starts of bench/pglite-server.ts: PGlite alone opening the same kind of
// directory and listening, the floor of a service that opens its store before it listens. A
// bare `node` listening on a port is shown too (the runtime's own start). Service and baseline
// alternate which goes first in each round, so machine noise hits both. The service keeps its
// compile cache under DATA_DIR, so a first start here is cold, as a user's is, and a restart warm.

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

interface Starts {
  first: number[];
  restart: number[];
}

/** Spawns `script` with a free PORT and `env`, and returns ms until `ready` shows on stdout or stderr. */
async function timeStart(script: string, env: Record<string, string>, ready: RegExp) {
  const port = String(await freePort());
  const started = performance.now();
  const child = await startNode(script, { PORT: port, ...env }, ready);
  const ms = performance.now() - started;
  await child.stop();
  return ms;
}

/** One first start and one restart of `script` on a fresh DATA_DIR. */
async function startTwice(
  script: string,
  env: Record<string, string>,
  ready: RegExp,
  into: Starts,
): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-bench-startup-'));
  try {
    into.first.push(await timeStart(script, { ...env, DATA_DIR: dataDir }, ready));
    into.restart.push(await timeStart(script, { ...env, DATA_DIR: dataDir }, ready));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const SERVICE_ENV = {
  DATABASE_URL: '', // the embedded store, whatever the shell has
  LOG_LEVEL: 'warn',
  INGEST_TOKENS: 'bench-ingest-token-0123456789',
  BOOTSTRAP_API_KEY: 'bench_bootstrap_key_0123456789abcdef',
};
const BARE_NODE = join(tmpdir(), 'agin-bench-bare-node.mjs');

async function main(): Promise<void> {
  writeFileSync(
    BARE_NODE,
    "import { createServer } from 'node:http';\n" +
      "createServer().listen(+process.env.PORT, '127.0.0.1', () => console.log('bare listening'));\n",
  );
  const service: Starts = { first: [], restart: [] };
  const pglite: Starts = { first: [], restart: [] };
  const bare: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const runService = () => startTwice('src/main.ts', SERVICE_ENV, /listening on/, service);
    const runPglite = () => startTwice('bench/pglite-server.ts', {}, /pglite listening/, pglite);
    if (round % 2 === 0) {
      await runService();
      await runPglite();
    } else {
      await runPglite();
      await runService();
    }
    bare.push(await timeStart(BARE_NODE, {}, /bare listening/));
    process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
  }
  rmSync(BARE_NODE, { force: true });

  const ms = (values: number[]) => Math.round(median(values));
  const spread = (values: number[]) =>
    `${Math.round(percentile(values, 10))}–${Math.round(percentile(values, 90))}`;
  process.stdout.write(
    `\nms from spawn to "listening", median of ${ROUNDS} rounds (p10–p90); embedded store\n\n`,
  );
  printTable(
    ['start', 'service', 'p10–p90', 'PGlite alone', 'p10–p90', 'ratio', 'bare node'],
    (['first', 'restart'] as const).map((kind) => [
      kind === 'first' ? 'first (empty DATA_DIR)' : 'restart (same DATA_DIR)',
      ms(service[kind]),
      spread(service[kind]),
      ms(pglite[kind]),
      spread(pglite[kind]),
      ratioOf(median(service[kind]), median(pglite[kind])),
      ms(bare),
    ]),
  );
  process.stdout.write('\n');
  for (const kind of ['first', 'restart'] as const) {
    report(
      {
        bench: `startup-${kind}`,
        value: ms(service[kind]),
        unit: 'ms',
        baseline: ms(pglite[kind]),
        ratio: ratioOf(median(service[kind]), median(pglite[kind])),
        spread: spreadOf(service[kind].map((t, i) => t / pglite[kind][i])),
      },
      [],
    );
  }
}

await main();
