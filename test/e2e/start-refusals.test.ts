import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess } from '../helpers/run-process.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import { POSTGRES_ADMIN_URL, postgresStore, type TestStore } from '../helpers/stores.ts';

// A configuration mistake found only at start is one line on stderr (after the progress lines
// of the steps begun) and exit code 78, never a stack trace. Instances sharing one PostgreSQL must share SECRETS_KEY: a key each generated for
// itself would seal secrets the others cannot open. Without it a start is refused with one line
// that says where the key to use is; a key that does not open the store's secrets is refused the
// same way (docs/decisions.md#shared-secrets-key).

const SETPRIV = '/usr/bin/setpriv';

/** The key ids sealed values carry (src/shared/secrets.ts): the first 8 of its SHA-256, base64url. */
function keyId(base64: string): string {
  return createHash('sha256').update(Buffer.from(base64, 'base64')).digest('base64url').slice(0, 8);
}

/** Runs `node src/main.ts` until it exits: a refused start. It dies with the test if it starts. */
function refusedStart(dataDir: string, env: Record<string, string>) {
  return runProcess(SETPRIV, ['--pdeathsig', 'KILL', process.execPath, 'src/main.ts'], {
    PORT: '0',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    SSH_PORT: '0',
    AGENT_PORT: '0',
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    CERT_POLL_MS: '0',
    SECRETS_KEY: '',
    ...env,
  });
}

/** The start's progress lines (src/service.ts), said before each slow step it begins. */
const PROGRESS =
  /^(Connecting to PostgreSQL \(DATABASE_URL\)|Opening the embedded store under \S+|Creating the embedded store under \S+ \(first start only(; no template for this PGlite, this takes a while)?\)|Starting the pipeline \(\d+ worker threads\))…$/;

/** One clear line on stderr after the progress of the steps begun, no stack trace. */
function expectOneLine(stderr: string, ...parts: string[]) {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((line) => !PROGRESS.test(line));
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  for (const part of parts) expect(lines[0]).toContain(part);
}

describe('SECRETS_KEY on instances sharing PostgreSQL', () => {
  let store: TestStore;
  const dirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'agin-e2e-keys-')));
  const services: ServiceProcess[] = [];
  // What an earlier version generated into the first instance's DATA_DIR without SECRETS_KEY.
  const generated = randomBytes(32).toString('base64');
  let destinationId: string;

  beforeAll(async () => {
    store = await postgresStore();
    writeFileSync(join(dirs[0], 'secrets.key'), `${generated}\n`, { mode: 0o600 });
    // That instance sealed a destination password with its key.
    const first = await startServiceProcess({
      dataDir: dirs[0],
      env: { DATABASE_URL: store.env.DATABASE_URL!, SECRETS_KEY: generated },
    });
    services.push(first);
    const created = await first.api('POST', '/event_destinations', {
      target: { clickhouse: { url: 'http://127.0.0.1:9', user: 'writer', password: 'pw-1' } },
    });
    expect(created.status).toBe(201);
    destinationId = created.body.id;
    expect((await first.stop()).code).toBe(0);
  });
  afterAll(async () => {
    await Promise.all(services.filter((s) => s.running()).map((s) => s.stop('SIGKILL')));
    await store?.cleanup();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to start without SECRETS_KEY, naming the key file an earlier start generated', async () => {
    const { code, stderr } = await refusedStart(dirs[0], { DATABASE_URL: store.env.DATABASE_URL! });
    expect(code).toBe(78);
    expectOneLine(
      stderr,
      'invalid configuration: SECRETS_KEY must be set with DATABASE_URL, the same on every instance',
      `set SECRETS_KEY to the content of ${join(dirs[0], 'secrets.key')} on every instance`,
    );
  });

  it('refuses a second instance without SECRETS_KEY, saying where to take the key from', async () => {
    const { code, stderr } = await refusedStart(dirs[1], { DATABASE_URL: store.env.DATABASE_URL! });
    expect(code).toBe(78);
    expectOneLine(
      stderr,
      'invalid configuration: SECRETS_KEY must be set with DATABASE_URL',
      "take the key from that instance's DATA_DIR/secrets.key",
    );
  });

  it('refuses a SECRETS_KEY that does not open the store’s secrets, naming both keys', async () => {
    const other = randomBytes(32).toString('base64');
    const { code, stderr } = await refusedStart(dirs[1], {
      DATABASE_URL: store.env.DATABASE_URL!,
      SECRETS_KEY: other,
    });
    expect(code).toBe(78);
    expectOneLine(
      stderr,
      'invalid configuration: SECRETS_KEY does not open the store',
      `sealed with key ${keyId(generated)}, which is neither SECRETS_KEY (${keyId(other)}) nor in SECRETS_KEY_PREVIOUS`,
    );
  });

  it('runs both instances once each has the first instance’s key as SECRETS_KEY', async () => {
    const env = { DATABASE_URL: store.env.DATABASE_URL!, SECRETS_KEY: generated };
    const [first, second] = await Promise.all(
      dirs.map((dataDir) => startServiceProcess({ dataDir, env })),
    );
    services.push(first, second);
    for (const service of [first, second]) {
      const shown = await service.api('GET', `/event_destinations/${destinationId}`);
      expect(shown.body.target.clickhouse.password_set).toBe(true);
    }
    expect((await second.stop()).code).toBe(0);
    expect((await first.stop()).code).toBe(0);
  });
});

describe('other settings found wrong at start', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-e2e-refusals-'));
  const secrets = { SECRETS_KEY: randomBytes(32).toString('base64') };
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('refuses a DATABASE_URL that does not connect, without showing its password', async () => {
    const unreachable = await refusedStart(dataDir, {
      ...secrets,
      DATABASE_URL: 'postgres://postgres:hunter2-secret@127.0.0.1:1/agin',
    });
    expect(unreachable.code).toBe(78);
    expectOneLine(
      unreachable.stderr,
      'invalid configuration: DATABASE_URL does not connect: connect ECONNREFUSED 127.0.0.1:1',
    );
    expect(unreachable.stderr).not.toContain('hunter2');
    const url = new URL(POSTGRES_ADMIN_URL);
    url.pathname = '/agin_no_such_database';
    const missing = await refusedStart(dataDir, { ...secrets, DATABASE_URL: url.toString() });
    expect(missing.code).toBe(78);
    expectOneLine(missing.stderr, 'database "agin_no_such_database" does not exist');
  });

  it('refuses a port another process holds, naming the address', async () => {
    // On PostgreSQL: the listeners start sooner than after a first embedded store.
    const store = await postgresStore();
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as AddressInfo;
    try {
      const { code, stderr } = await refusedStart(dataDir, {
        ...store.env,
        SSH_PORT: String(port),
      });
      expect(code).toBe(78);
      expectOneLine(stderr, `cannot listen on 127.0.0.1:${port}: the address is in use; see`);
    } finally {
      holder.close();
      await store.cleanup();
    }
  });
});
