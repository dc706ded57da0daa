import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectError } from '../helpers/expect-error.ts';
import { useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

// Deleting a destination removes its spool from disk. While the spool holds events the delete is
// refused (409 ERR_DESTINATION_BACKLOG) unless the caller discards them with ?discard_backlog=true.

describe.each(STORES)('deleting a destination on $kind', ({ open }) => {
  const t = useTestService(open, { BATCH_LINGER_MS: '5' });
  const spoolDir = (id: string) => join(t.store.env.DATA_DIR, 'spool', id);

  async function destination(target: unknown): Promise<string> {
    const created = await t.api('POST', '/event_destinations', { target });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await t.service.pipeline.reload();
    return created.body.id;
  }

  it('removes the spool directory of a destination deleted without a backlog', async () => {
    const id = await destination({ file: { path: 'deleted' } });
    const tested = await t.api('POST', `/event_destinations/${id}/test`);
    expect(tested.body.status).toBe('delivered');
    expect(existsSync(spoolDir(id))).toBe(true);
    expect((await t.api('DELETE', `/event_destinations/${id}`)).status).toBe(204);
    await t.service.pipeline.reload();
    expect(existsSync(spoolDir(id))).toBe(false);
  });

  it('refuses to delete a destination whose spool holds events, unless told to discard them', async () => {
    const id = await destination({ clickhouse: { url: 'http://127.0.0.1:9' } });
    const tested = await t.api('POST', `/event_destinations/${id}/test`);
    expect(tested.body.status).toBe('spooled');
    expect(readdirSync(spoolDir(id)).filter((n) => n.endsWith('.batch'))).toHaveLength(1);

    for (const query of ['', '?discard_backlog=false']) {
      const refused = await t.api('DELETE', `/event_destinations/${id}${query}`);
      expectError(refused, 409, 'ERR_DESTINATION_BACKLOG', 'discard_backlog=true');
      expect(refused.body.details).toMatchObject({ id, backlog: { events: 1 } });
    }
    expectError(
      await t.api('DELETE', `/event_destinations/${id}?discard_backlog=yes`),
      400,
      'ERR_INVALID_QUERY',
      'discard_backlog',
    );
    expectError(
      await t.api('DELETE', `/event_destinations/${id}?force=true`),
      400,
      'ERR_INVALID_QUERY',
      'force',
    );
    expect((await t.api('GET', `/event_destinations/${id}`)).status).toBe(200);
    expect(existsSync(spoolDir(id))).toBe(true);

    expect((await t.api('DELETE', `/event_destinations/${id}?discard_backlog=true`)).status).toBe(
      204,
    );
    await t.service.pipeline.reload();
    expectError(await t.api('GET', `/event_destinations/${id}`), 404, 'ERR_NOT_FOUND');
    expect(existsSync(spoolDir(id))).toBe(false);
  });
});
