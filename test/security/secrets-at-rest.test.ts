import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { loadPipelineConfig } from '../../src/data-plane/store/pipeline-config.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { openStore } from '../../src/store/index.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { startServiceProcess } from '../helpers/service-process.ts';
import { STORES } from '../helpers/stores.ts';

// Destination passwords are encrypted in the store (SECRETS_KEY, or DATA_DIR/secrets.key), and
// everything the service writes under DATA_DIR is readable by its own user only.

const unique = (label: string) => `${label}-${randomBytes(9).toString('base64url')}`;
const newKey = () => randomBytes(32).toString('base64');
const deadClickHouse = (password: string) => ({
  clickhouse: { url: 'http://127.0.0.1:9', user: 'writer', password },
});

/** The raw text of the stored targets, as the store's own files hold them. */
async function rawTargets(env: Record<string, string>): Promise<string> {
  const db = await openStore(loadConfig(env));
  try {
    const rows = await db.query<{ text: string }>(
      'SELECT target::text AS text FROM event_destinations ORDER BY id',
    );
    return rows.rows.map((row) => row.text).join('\n');
  } finally {
    await db.close();
  }
}

/** The key id of each sealed value in a text. */
const keyIds = (text: string) => [...text.matchAll(/enc:v1:([^:"]+):/g)].map((m) => m[1]);

describe.each(STORES)('destination secrets at rest on $kind', ({ open }) => {
  it('stores no password in clear, and a start encrypts those an earlier version stored', async () => {
    const store = await open();
    try {
      const legacy = unique('legacy-pw');
      const db = await openStore(loadConfig(store.env));
      const account = await createAccount(db);
      await mintApiKey(db, { accountId: account, token: TEST_BOOTSTRAP_KEY }, null, 'http://x');
      await db.query(
        `INSERT INTO event_destinations (id, account_id, description, metadata, format, target, created_at)
         VALUES ('ed_legacy', $1, '', '', 'JSON', $2, now())`,
        [account, JSON.stringify(deadClickHouse(legacy))],
      );
      await db.close();

      const service = await startTestService(store);
      const fresh = unique('fresh-pw');
      try {
        const api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
        const created = await api('POST', '/event_destinations', {
          target: {
            kafka: {
              brokers: ['127.0.0.1:9'],
              topic: 't',
              sasl: { mechanism: 'plain', username: 'u', password: fresh },
            },
          },
        });
        expect(created.status).toBe(201);
        const shown = await api('GET', '/event_destinations/ed_legacy');
        expect(shown.body.target.clickhouse.password_set).toBe(true);
        // The pipeline gets them in clear, to use them.
        const targets = (await loadPipelineConfig(service.db, service.keyring)).destinations;
        expect(JSON.stringify(targets)).toContain(legacy);
        expect(JSON.stringify(targets)).toContain(fresh);
      } finally {
        await service.close();
      }
      const raw = await rawTargets(store.env);
      expect(raw).not.toContain(legacy);
      expect(raw).not.toContain(fresh);
      expect(keyIds(raw)).toHaveLength(2);
    } finally {
      await store.cleanup();
    }
  });

  it('rotates SECRETS_KEY: the previous key still opens values, and a start re-encrypts them', async () => {
    const store = await open();
    try {
      const [oldKey, nextKey] = [newKey(), newKey()];
      const password = unique('rotated-pw');
      let service = await startTestService(store, { SECRETS_KEY: oldKey });
      const created = await apiClient(service.url, TEST_BOOTSTRAP_KEY)(
        'POST',
        '/event_destinations',
        {
          target: deadClickHouse(password),
        },
      );
      expect(created.status).toBe(201);
      await service.close();
      const before = keyIds(await rawTargets(store.env));

      // The new key alone cannot open what the old one sealed: the start says which is missing.
      await expect(startTestService(store, { SECRETS_KEY: nextKey })).rejects.toThrow(
        /SECRETS_KEY_PREVIOUS/,
      );
      service = await startTestService(store, {
        SECRETS_KEY: nextKey,
        SECRETS_KEY_PREVIOUS: oldKey,
      });
      await service.close();
      const after = keyIds(await rawTargets(store.env));
      expect(after).toHaveLength(1);
      expect(after[0]).not.toBe(before[0]);

      // Re-encrypted: the old key is no longer needed.
      service = await startTestService(store, { SECRETS_KEY: nextKey });
      try {
        const targets = await loadPipelineConfig(service.db, service.keyring);
        expect(targets.destinations[0].target).toEqual(deadClickHouse(password));
      } finally {
        await service.close();
      }
    } finally {
      await store.cleanup();
    }
  });
});

/** Every path under dir with its permission bits (symbolic links are not followed). */
function modesUnder(dir: string): { path: string; dir: boolean; mode: number }[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const stat = lstatSync(path);
    const entry = { path, dir: stat.isDirectory(), mode: stat.mode & 0o777 };
    return stat.isDirectory() ? [entry, ...modesUnder(path)] : [entry];
  });
}

describe('data files on disk (the service as a process)', () => {
  const root = mkdtempSync(join(tmpdir(), 'agin-modes-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('creates DATA_DIR 0700 and every directory 0700, every file 0600; no password in the store files', async () => {
    const dataDir = join(root, 'fresh', 'data');
    const password = unique('ch-pw');
    const service = await startServiceProcess({ dataDir, env: { BATCH_LINGER_MS: '5' } });
    try {
      const ids: string[] = [];
      for (const target of [{ file: { path: 'modes/nested' } }, deadClickHouse(password)]) {
        const created = await service.api('POST', '/event_destinations', { target });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        ids.push(created.body.id);
        const tested = await service.api('POST', `/event_destinations/${created.body.id}/test`);
        expect(tested.status, JSON.stringify(tested.body)).toBe(200);
      }
      // The file destination wrote its events, the dead ClickHouse spooled its test event.
      const spooled = readdirSync(join(dataDir, 'spool', ids[1]));
      expect(spooled.some((name) => name.endsWith('.batch'))).toBe(true);
    } finally {
      expect((await service.stop()).code).toBe(0);
    }
    expect(lstatSync(dataDir).mode & 0o777).toBe(0o700);
    const entries = modesUnder(dataDir);
    const wrong = entries
      .filter((e) => e.mode !== (e.dir ? 0o700 : 0o600))
      .map((e) => `${e.path} ${e.mode.toString(8)}`);
    expect(wrong).toEqual([]);
    const names = entries.map((e) => e.path.slice(dataDir.length + 1));
    expect(names).toContain('secrets.key');
    expect(names.some((n) => /^store\/pg_wal\//.test(n))).toBe(true);
    expect(names.some((n) => /^events\/ac_[^/]+\/modes\/nested\/events-/.test(n))).toBe(true);
    const leaks = entries
      .filter((e) => !e.dir && readFileSync(e.path).toString('latin1').includes(password))
      .map((e) => e.path);
    expect(leaks).toEqual([]);
  });

  it('makes an existing DATA_DIR 0700', async () => {
    const dataDir = join(root, 'existing');
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const service = await startServiceProcess({ dataDir });
    expect((await service.stop()).code).toBe(0);
    expect(lstatSync(dataDir).mode & 0o777).toBe(0o700);
  });
});
