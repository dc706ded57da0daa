import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import type { Service } from '../../src/service.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { openStore } from '../../src/store/index.ts';
import { expectError } from '../helpers/expect-error.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// Each account's file destinations live under DATA_DIR/events/<account_id>/: no path reaches
// another account's files, and another account's paths cannot be observed.

/** Names in a directory, or [] when it does not exist. */
function names(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}

/** The event ids of every NDJSON line in a directory's files (not its subdirectories). */
function eventIds(dir: string): string[] {
  return names(dir)
    .filter((name) => name.startsWith('events-'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n'))
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line).event_id);
}

describe.each(STORES)('file destination paths on $kind', ({ open }) => {
  let store: TestStore;
  let service: Service;
  let apiA: ApiClient;
  let apiB: ApiClient;
  let accountA: string;
  let accountB: string;
  const accountDir = (account: string) => join(store.env.DATA_DIR, 'events', account);

  beforeAll(async () => {
    store = await open();
    service = await startTestService(store, { BATCH_LINGER_MS: '5' });
    apiA = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountA = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
    accountB = await createAccount(service.db);
    const keyB = await mintApiKey(service.db, { accountId: accountB }, null, service.url);
    apiB = apiClient(service.url, keyB.token!);
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  async function create(api: ApiClient, path: string): Promise<string> {
    const created = await api('POST', '/event_destinations', { target: { file: { path } } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.target.file.path).toBe(path);
    return created.body.id;
  }

  async function sendTest(api: ApiClient, id: string) {
    const tested = await api('POST', `/event_destinations/${id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    return tested.body;
  }

  it('answers another account’s exact or nesting path like any other path, in its own directory', async () => {
    const archiveA = await create(apiA, 'a-archive');
    // What B is answered for A's path, a path inside it, and a path no one has are alike.
    const archiveB = await create(apiB, 'a-archive');
    const nestedB = await create(apiB, 'a-archive/x');
    await create(apiB, 'b-fresh');

    const [testA, testB, testNested] = [
      await sendTest(apiA, archiveA),
      await sendTest(apiB, archiveB),
      await sendTest(apiB, nestedB),
    ];
    for (const tested of [testA, testB, testNested]) expect(tested.status).toBe('delivered');
    expect(eventIds(join(accountDir(accountA), 'a-archive'))).toEqual([testA.event_id]);
    expect(eventIds(join(accountDir(accountB), 'a-archive'))).toEqual([testB.event_id]);
    expect(eventIds(join(accountDir(accountB), 'a-archive', 'x'))).toEqual([testNested.event_id]);
    // A's directory holds only A's files: nothing of B nests in it.
    expect(
      names(join(accountDir(accountA), 'a-archive')).every((n) => n.startsWith('events-')),
    ).toBe(true);
    expect(names(join(store.env.DATA_DIR, 'events')).filter((n) => !n.startsWith('.'))).toEqual(
      [accountA, accountB].sort(),
    );
  });

  it('refuses paths that are not a directory inside the account’s own', async () => {
    const escapes = [
      '.',
      './',
      '..',
      '../x',
      'a/../..',
      'a/../../x',
      `../${accountA}/a-archive`,
      '/tmp/absolute',
      join(accountDir(accountB), 'x'),
    ];
    for (const path of escapes) {
      expectError(
        await apiB('POST', '/event_destinations', { target: { file: { path } } }),
        400,
        'ERR_INVALID_TARGET',
        'path',
      );
    }
    const id = await create(apiB, 'patched');
    for (const path of escapes) {
      expectError(
        await apiB('PATCH', `/event_destinations/${id}`, { target: { file: { path } } }),
        400,
        'ERR_INVALID_TARGET',
        'path',
      );
    }
  });

  it('follows no symbolic link out of the account’s directory', async () => {
    await create(apiA, 'target-of-link');
    mkdirSync(accountDir(accountB), { recursive: true });
    symlinkSync(accountDir(accountA), join(accountDir(accountB), 'link'));
    for (const path of ['link', 'link/target-of-link', 'link/new']) {
      const id = await create(apiB, path);
      const tested = await sendTest(apiB, id);
      expect(tested.status).toBe('spooled');
      expect(tested.error).toMatch(/symbolic link/);
      expect(tested.health.status).toBe('parked');
    }
    expect(names(accountDir(accountA)).sort()).toEqual(['a-archive', 'target-of-link']);
    expect(names(join(accountDir(accountA), 'target-of-link'))).toEqual([]);
  });

  it('moves file destinations of the old layout into their account’s directory at start', async () => {
    const legacy = await open();
    try {
      // Rows and files as an earlier version left them: paths shared DATA_DIR/events, so B's
      // destination nested inside A's and C's was the events directory itself.
      const db = await openStore(loadConfig(legacy.env));
      const [a, b, c] = [await createAccount(db), await createAccount(db), await createAccount(db)];
      await mintApiKey(db, { accountId: a, token: TEST_BOOTSTRAP_KEY }, null, 'http://x');
      const ids: Record<string, string> = {};
      for (const [account, path] of [
        [a, 'archive'],
        [b, 'archive/x'],
        [c, '.'],
      ]) {
        const id = `ed_legacy${Object.keys(ids).length}`;
        ids[path] = id;
        await db.query(
          `INSERT INTO event_destinations (id, account_id, description, metadata, format, target, created_at)
           VALUES ($1, $2, '', '', 'JSON', $3, now())`,
          [id, account, JSON.stringify({ file: { path } })],
        );
      }
      await db.close();
      const events = join(legacy.env.DATA_DIR, 'events');
      const file = (dir: string, name: string, id: string) => {
        mkdirSync(join(events, dir), { recursive: true });
        writeFileSync(join(events, dir, name), `${JSON.stringify({ event_id: id })}\n`);
      };
      file('archive', 'events-20260101T000000Z-000000.ndjson', 'ev_a');
      file('archive/x', 'events-20260101T000000Z-000000.ndjson', 'ev_b');
      file('.', 'events-20260101T000000Z-000000.ndjson', 'ev_c');
      file('deleted-long-ago', 'events-20260101T000000Z-000000.ndjson', 'ev_gone');

      let restarted = await startTestService(legacy, { BATCH_LINGER_MS: '5' });
      await restarted.close();
      restarted = await startTestService(legacy, { BATCH_LINGER_MS: '5' }); // a second start moves nothing
      try {
        expect(eventIds(join(events, a, 'archive'))).toEqual(['ev_a']);
        expect(names(join(events, a, 'archive'))).toEqual([
          'events-20260101T000000Z-000000.ndjson',
        ]);
        expect(eventIds(join(events, b, 'archive', 'x'))).toEqual(['ev_b']);
        expect(eventIds(join(events, c))).toEqual(['ev_c']);
        expect(names(events).filter((n) => !n.startsWith('.'))).toEqual([a, b, c].sort());
        // What no destination claims is kept aside, not handed to anyone.
        const unclaimed = join(events, '.unclaimed', 'deleted-long-ago');
        expect(eventIds(unclaimed)).toEqual(['ev_gone']);
        // A's destination writes on where its old files now are.
        const tested = await sendTest(apiClient(restarted.url, TEST_BOOTSTRAP_KEY), ids.archive);
        expect(tested.status).toBe('delivered');
        expect(eventIds(join(events, a, 'archive')).sort()).toEqual(
          ['ev_a', tested.event_id].sort(),
        );
      } finally {
        await restarted.close();
      }
    } finally {
      await legacy.cleanup();
    }
  });
});
