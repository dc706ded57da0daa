import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renewalTime, retryDelay } from '../../src/control-plane/certs/runner.ts';
import { type Db, openPglite } from '../../src/store/db.ts';
import {
  cancelJobs,
  claimJob,
  endJob,
  queueJob,
  queueJobOnce,
  reportJob,
} from '../../src/store/jobs.ts';
import { migrate } from '../../src/store/migrate.ts';

const KIND = 'certificate_provisioning';
const LEASE = 60_000;
const at = (ms: number) => new Date(Date.UTC(2030, 0, 1) + ms);

describe('job leases', () => {
  let db: Db;
  beforeAll(async () => {
    db = await openPglite(null);
    await migrate(db);
    await db.query(`INSERT INTO accounts (id) VALUES ('acct_1')`);
  });
  afterAll(() => db.close());

  const queue = (subjectId: string) =>
    queueJob(db, { accountId: 'acct_1', kind: KIND, subjectId, msg: 'queued' });
  const claim = (owner: string, now: Date) =>
    claimJob(db, { kind: KIND, owner, now, leaseMs: LEASE });

  it('gives a job to one runner until its lease ends, then to another', async () => {
    const job = await queue('ai_1');
    const first = await claim('runner_a', at(0));
    expect(first?.id).toBe(job.id);
    expect(await claim('runner_b', at(LEASE - 1))).toBeUndefined();
    const second = await claim('runner_b', at(LEASE));
    expect([second?.id, second?.lease_owner]).toEqual([job.id, 'runner_b']);
    // The first runner lost it: its report and its end change nothing.
    expect(await reportJob(db, first!, 'still working')).toBe(false);
    expect(await endJob(db, first!, { state: 'done' }, 'done')).toBeUndefined();
    const ended = await endJob(db, second!, { state: 'done' }, 'issued');
    expect([ended?.state, ended?.msg, ended?.lease_owner]).toEqual(['done', 'issued', null]);
  });

  it('retries a failed job at retries_at, counting attempts', async () => {
    await queue('ai_2');
    const job = await claim('runner_a', at(0));
    const failed = await endJob(
      db,
      job!,
      { state: 'failed', errorCode: 'INTERNAL_ERROR', retriesAt: at(30_000) },
      'down',
    );
    expect([failed?.error_code, failed?.attempts]).toEqual(['INTERNAL_ERROR', 1]);
    expect(await claim('runner_a', at(29_999))).toBeUndefined();
    const again = await claim('runner_b', at(30_000));
    expect([again?.id, again?.started_at.getTime()]).toEqual([job!.id, at(30_000).getTime()]);
    await endJob(db, again!, { state: 'done' }, 'issued');
  });

  it('never runs a cancelled job, and holds one unfinished job per subject', async () => {
    const job = await queue('ai_3');
    const now = at(0);
    const renewal = { accountId: 'acct_1', kind: KIND, subjectId: 'ai_3', msg: 'renew', now };
    expect(await queueJobOnce(db, renewal)).toBeUndefined();
    await cancelJobs(db, 'ai_3');
    expect(await claim('runner_a', at(0))).toBeUndefined();
    expect((await queueJobOnce(db, renewal))?.msg).toBe('renew');
    expect((await claim('runner_a', at(0)))?.id).not.toBe(job.id);
  });
});

describe('schedules', () => {
  it('backs off exponentially from 30 s up to the cap', () => {
    expect([0, 1, 2, 3].map((n) => retryDelay(n, 3_600_000))).toEqual([
      30_000, 60_000, 120_000, 240_000,
    ]);
    expect(retryDelay(20, 3_600_000)).toBe(3_600_000);
    expect(retryDelay(5000, 3_600_000)).toBe(3_600_000);
  });

  it('renews 30 days before the end, or at two thirds of a short life', () => {
    const day = 86_400_000;
    expect(renewalTime(at(0), at(90 * day))).toEqual(at(60 * day));
    expect(renewalTime(at(0), at(6 * day))).toEqual(at(4 * day));
  });
});
