import type { Db } from '../../store/db.ts';
import { queueJobOnce } from '../../store/jobs.ts';
import { PROVISIONING_JOB } from './policy.ts';
import { type CertSubject, showStatus } from './subjects.ts';

export { PROVISIONING_JOB };

/**
 * Queues a renewal for every managed ingress and reserved domain whose renews_at has come and
 * which has no unfinished job (the store's one-active-job index makes two instances queue once).
 */
export async function queueRenewals(db: Db, now: Date): Promise<number> {
  const due = await db.query<{ id: string; account_id: string; domain: string; kind: string }>(
    `SELECT id, account_id, domain, 'agent_ingress' AS kind FROM agent_ingresses
     WHERE cert_policy IS NOT NULL AND renews_at <= $1
     UNION ALL
     SELECT id, account_id, fields->>'domain', 'reserved_domain' FROM account_objects
     WHERE kind = 'reserved_domains'
       AND jsonb_typeof(fields->'certificate_management_policy') = 'object'
       AND (fields->'certificate_management_status'->>'renews_at')::timestamptz <= $1`,
    [now],
  );
  let queued = 0;
  for (const row of due.rows) {
    const msg = `certificate renewal for ${row.domain} is queued`;
    const job = { accountId: row.account_id, kind: PROVISIONING_JOB, subjectId: row.id, msg, now };
    const queuedJob = await queueJobOnce(db, job);
    if (queuedJob === undefined) continue;
    const subject = { id: row.id, kind: row.kind as CertSubject['kind'] };
    await showStatus(db, subject, queuedJob);
    queued += 1;
  }
  return queued;
}
