import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.ts';
import {
  claimSession,
  dropPredecessors,
  type NewSession,
  releaseSession,
  renewSessions,
  sessionOfAccount,
  sessionOfEndpoint,
  sessionPage,
} from '../../src/store/agent-sessions.ts';
import type { Db } from '../../src/store/db.ts';
import { openStore } from '../../src/store/index.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// The session registry several instances share: one live session per endpoint, a limit per
// account, leases that lapse when their instance stops renewing them.

const LONG = { maxPerAccount: 3, leaseMs: 60_000 };

/** A session row of `account` for `endpoint`, owned by `owner`. */
function row(account: string, endpoint: string, owner = 'inst_a'): NewSession {
  return {
    id: newId('ts'),
    account_id: account,
    endpoint,
    owner_id: owner,
    owner_url: owner === 'inst_a' ? 'http://127.0.0.1:1' : '',
    credential_id: 'cr_1',
    credential_kind: 'credentials',
    agent_ip: '127.0.0.1',
    agent_version: 'SSH-2.0-OpenSSH_9.2',
    region: 'us',
    started_at: new Date(),
    os: '',
    arch: '',
    hostname: '',
    metadata: endpoint,
    user_agent: 'SSH-2.0-OpenSSH_9.2',
    transport: 'ssh',
    proto: 'http',
    forwards_to: '',
  };
}

describe.each(STORES)('the shared session registry on $kind', ({ open }) => {
  let store: TestStore;
  let db: Db;

  beforeAll(async () => {
    store = await open();
    db = await openStore({
      databaseUrl: store.env.DATABASE_URL,
      dataDir: store.env.DATA_DIR,
    });
  });
  afterAll(async () => {
    await db?.close();
    await store?.cleanup();
  });

  it('records a session once per endpoint: a second claim names the holder', async () => {
    const first = row('ac_one', 'a.example.com');
    expect(await claimSession(db, first, LONG)).toBeUndefined();
    expect(await claimSession(db, row('ac_two', 'a.example.com', 'inst_b'), LONG)).toEqual({
      holder: first.id,
      account: 'ac_one',
    });
    expect((await sessionOfEndpoint(db, 'a.example.com'))?.owner_url).toBe('http://127.0.0.1:1');
    expect((await sessionOfAccount(db, 'ac_one', first.id))?.endpoint).toBe('a.example.com');
    // Another account's session is not found by id.
    expect(await sessionOfAccount(db, 'ac_two', first.id)).toBeUndefined();
  });

  it('refuses a claim past the account limit, and claims at once are each admitted or refused', async () => {
    const claims = await Promise.all(
      ['1', '2', '3', '4', '5'].map((n) =>
        claimSession(db, row('ac_limit', `${n}.example.com`), LONG),
      ),
    );
    expect(claims.filter((claim) => claim === undefined)).toHaveLength(3);
    expect(claims.filter((claim) => claim !== undefined)).toEqual([{ full: true }, { full: true }]);
    const page = await sessionPage(db, 'ac_limit', { limit: 2, beforeId: undefined });
    expect(page.rows).toHaveLength(2);
    expect(page.more).toBe(true);
    const rest = await sessionPage(db, 'ac_limit', { limit: 2, beforeId: page.rows[1].id });
    expect(rest.rows).toHaveLength(1);
    expect(rest.more).toBe(false);
    expect(page.rows[0].id > page.rows[1].id && page.rows[1].id > rest.rows[0].id).toBe(true);
  });

  it('forgets a session whose lease lapsed, unless its owner renews it', async () => {
    // Renewed every 100 ms, a lease of 1 s holds on a busy machine; unrenewed, it lapses.
    const short = { maxPerAccount: 3, leaseMs: 1_000 };
    const crashed = row('ac_lease', 'crashed.example.com', 'inst_gone');
    const renewed = row('ac_lease', 'renewed.example.com', 'inst_live');
    expect(await claimSession(db, crashed, short)).toBeUndefined();
    expect(await claimSession(db, renewed, short)).toBeUndefined();
    for (let i = 0; i < 13; i++) {
      await sleep(100);
      expect((await renewSessions(db, 'inst_live', short.leaseMs)).recorded).toEqual(
        new Set([renewed.id]),
      );
    }
    expect(await sessionOfEndpoint(db, 'crashed.example.com')).toBeUndefined();
    expect((await sessionOfEndpoint(db, 'renewed.example.com'))?.id).toBe(renewed.id);
    const listed = await sessionPage(db, 'ac_lease', { limit: 10, beforeId: undefined });
    expect(listed.rows.map((r) => r.id)).toEqual([renewed.id]);
    // The lapsed row no longer holds its endpoint.
    const next = row('ac_other', 'crashed.example.com', 'inst_b');
    expect(await claimSession(db, next, short)).toBeUndefined();
    // These rows' credential (cr_1) is no account object: their owner is told to end them.
    expect((await renewSessions(db, 'inst_live', short.leaseMs)).credentialGone).toEqual(
      new Set([renewed.id]),
    );
    // Its owner, come back, finds it gone (and so ends the session it still had).
    expect((await renewSessions(db, 'inst_gone', short.leaseMs)).recorded).toEqual(new Set());
  });

  it('drops what a previous process left: at its address, or all with the embedded store', async () => {
    const before = row('ac_restart', 'before.example.com', 'inst_a');
    const elsewhere = row('ac_restart', 'elsewhere.example.com', 'inst_b');
    const mine = { ...row('ac_restart', 'mine.example.com'), owner_id: 'inst_new' };
    for (const session of [before, elsewhere, mine]) {
      expect(await claimSession(db, session, LONG)).toBeUndefined();
    }
    const dropped = await dropPredecessors(db, { id: 'inst_new', url: before.owner_url });
    const left = await sessionPage(db, 'ac_restart', { limit: 10, beforeId: undefined });
    // PostgreSQL: only the rows of this address (inst_a's) go; PGlite: every other owner's.
    const expected = db.kind === 'pglite' ? [mine.id] : [mine.id, elsewhere.id];
    expect(left.rows.map((r) => r.id).sort()).toEqual(expected.sort());
    expect(dropped).toBeGreaterThanOrEqual(1);
    expect(await sessionOfEndpoint(db, 'before.example.com')).toBeUndefined();
  });

  it('releases only its owner’s row', async () => {
    const held = row('ac_release', 'held.example.com');
    expect(await claimSession(db, held, LONG)).toBeUndefined();
    await releaseSession(db, held.id, 'inst_b');
    expect((await sessionOfEndpoint(db, 'held.example.com'))?.id).toBe(held.id);
    await releaseSession(db, held.id, 'inst_a');
    expect(await sessionOfEndpoint(db, 'held.example.com')).toBeUndefined();
  });
});
