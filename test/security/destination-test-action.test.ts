import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import type { Service } from '../../src/service.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { expectError } from '../helpers/expect-error.ts';
import {
  type ApiClient,
  apiClient,
  startTestService,
  TEST_BOOTSTRAP_KEY,
} from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

const TEST_TYPE = 'event_destination_test.v0';

/** Every NDJSON line a file destination has written so far (finished and open files). */
function fileLines(dataDir: string, accountId: string, path: string): any[] {
  const dir = join(dataDir, 'events', accountId, path);
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  return names.flatMap((name) =>
    readFileSync(join(dir, name), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line)),
  );
}

describe('POST /event_destinations/{id}/test', () => {
  let store: TestStore;
  let service: Service;
  let clickhouse: ClickHouseServer;
  let api: ApiClient;
  let accountId: string;

  beforeAll(async () => {
    [store, clickhouse] = await Promise.all([pgliteStore(), startClickHouse()]);
    service = await startTestService(store, { BATCH_LINGER_MS: '5' });
    api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    accountId = (await service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0].id;
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([clickhouse?.close(), store?.cleanup()]);
  });

  async function destination(target: unknown): Promise<string> {
    const created = await api('POST', '/event_destinations', { target });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.id;
  }

  const auditRows = async () =>
    (await service.db.query('SELECT count(*)::int AS n FROM audit_outbox')).rows[0].n;

  it('writes the synthetic event to a file destination and reports it delivered', async () => {
    const id = await destination({ file: { path: 'test-action' } });
    const auditBefore = await auditRows();
    // Sent right after the create: the action reloads the pipeline, so the new destination is open.
    const tested = await api('POST', `/event_destinations/${id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    expect(tested.body).toEqual({
      event_id: expect.stringMatching(/^ev_[0-9a-z]{26}$/),
      delivered: true,
      status: 'delivered',
      error: null,
      health: expect.objectContaining({ status: 'ok', last_error: null }),
    });
    expect(tested.body.health.last_success_at).not.toBeNull();

    const lines = fileLines(store.env.DATA_DIR, accountId, 'test-action');
    expect(lines).toEqual([
      {
        event_id: tested.body.event_id,
        event_type: TEST_TYPE,
        event_timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        account_id: accountId,
        principal: null,
        object: { destination_id: id, message: expect.any(String) },
      },
    ]);
    // A test changes no account object: no audit event.
    expect(await auditRows()).toBe(auditBefore);
    // An empty JSON object is accepted as a body too; anything in it is not.
    expect((await api('POST', `/event_destinations/${id}/test`, {})).status).toBe(200);
    expectError(
      await api('POST', `/event_destinations/${id}/test`, { dry_run: true }),
      400,
      'ERR_UNKNOWN_FIELD',
    );
    expect(fileLines(store.env.DATA_DIR, accountId, 'test-action')).toHaveLength(2);
  });

  it('reports a dead ClickHouse honestly: spooled, with the error, and retried later', async () => {
    const id = await destination({ clickhouse: { url: 'http://127.0.0.1:9', password: 'pw' } });
    const tested = await api('POST', `/event_destinations/${id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    expect(tested.body).toMatchObject({ delivered: false, status: 'spooled' });
    expect(tested.body.error).toMatch(/clickhouse/i);
    expect(tested.body.health).toMatchObject({
      status: 'retrying',
      last_error: tested.body.error,
      backlog: { events: 1 },
    });
    // A second test queues behind the first: still not delivered, still honest about why.
    const again = await api('POST', `/event_destinations/${id}/test`);
    expect(again.body).toMatchObject({ delivered: false, status: 'spooled' });
    expect(again.body.health.backlog.events).toBe(2);
  });

  it('lands in the audit table of a live ClickHouse without parking the destination', async () => {
    const id = await destination({
      clickhouse: { url: clickhouse.url, database: 'agin_test', table_prefix: 't_' },
    });
    const tested = await api('POST', `/event_destinations/${id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    expect(tested.body).toMatchObject({ delivered: true, status: 'delivered', error: null });
    expect(tested.body.health.status).toBe('ok');
    const rows = await clickhouse.query(
      `SELECT event_id, event_type, account_id, object FROM agin_test.t_audit_events_v0 FORMAT JSONEachRow`,
    );
    const row = JSON.parse(rows.trim());
    expect(row).toMatchObject({
      event_id: tested.body.event_id,
      event_type: TEST_TYPE,
      account_id: accountId,
    });
    expect(JSON.parse(row.object)).toMatchObject({ destination_id: id });
  });

  it('answers 404 for another account’s destination and sends it nothing', async () => {
    const id = await destination({ file: { path: 'not-yours' } });
    const other = await createAccount(service.db);
    const key = await mintApiKey(service.db, { accountId: other }, null, service.url);
    const stranger = apiClient(service.url, key.token!);
    expectError(await stranger('POST', `/event_destinations/${id}/test`), 404, 'ERR_NOT_FOUND', id);
    expectError(
      await api('POST', '/event_destinations/ed_06h01yxdm92k83aqhq7nqc0ear/test'),
      404,
      'ERR_NOT_FOUND',
    );
    expect(fileLines(store.env.DATA_DIR, accountId, 'not-yours')).toEqual([]);
    expectError(await api('GET', `/event_destinations/${id}/test`), 405, 'ERR_METHOD_NOT_ALLOWED');
  });
});
