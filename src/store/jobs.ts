import { newId } from '../shared/ids.ts';
import type { Queryable } from './db.ts';

/** A background job (certificate provisioning) as stored. */
export interface JobRow {
  id: string;
  account_id: string;
  kind: string;
  subject_id: string;
  state: 'queued' | 'running' | 'failed' | 'done' | 'cancelled';
  msg: string;
  error_code: string | null;
  started_at: Date;
  retries_at: Date | null;
  created_at: Date;
  /** The runner holding the job while it runs, and until when (another may take it after). */
  lease_owner?: string | null;
  lease_until?: Date | null;
  /** Failures so far, for the backoff. */
  attempts?: number;
}

/** Queues a job for a subject and returns it. */
export async function queueJob(
  db: Queryable,
  job: { accountId: string; kind: string; subjectId: string; msg: string },
): Promise<JobRow> {
  const now = new Date();
  const row: JobRow = {
    id: newId('job'),
    account_id: job.accountId,
    kind: job.kind,
    subject_id: job.subjectId,
    state: 'queued',
    msg: job.msg,
    error_code: null,
    started_at: now,
    retries_at: null,
    created_at: now,
  };
  await db.query(
    `INSERT INTO jobs (id, account_id, kind, subject_id, state, msg, started_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [row.id, row.account_id, row.kind, row.subject_id, row.state, row.msg, now, now],
  );
  return row;
}

/** The unfinished (queued, running or failing) job of each subject, newest per subject. */
export async function activeJobs(
  db: Queryable,
  subjectIds: string[],
): Promise<Map<string, JobRow>> {
  if (subjectIds.length === 0) return new Map();
  const result = await db.query<JobRow>(
    `SELECT DISTINCT ON (subject_id) * FROM jobs
     WHERE subject_id = ANY($1) AND state IN ('queued', 'running', 'failed')
     ORDER BY subject_id, created_at DESC, id DESC`,
    [subjectIds],
  );
  return new Map(result.rows.map((row) => [row.subject_id, row]));
}

/** Cancels a subject's unfinished jobs (policy removed, object deleted). */
export async function cancelJobs(db: Queryable, subjectId: string): Promise<void> {
  await db.query(
    `UPDATE jobs SET state = 'cancelled' WHERE subject_id = $1 AND state IN ('queued', 'running', 'failed')`,
    [subjectId],
  );
}

/**
 * Takes the oldest job that is due (queued, failed and past retries_at, or running under an
 * expired lease) for `owner` until `now + leaseMs`. SKIP LOCKED: two runners never take one job.
 */
export async function claimJob(
  db: Queryable,
  claim: { kind: string; owner: string; now: Date; leaseMs: number },
): Promise<JobRow | undefined> {
  const result = await db.query<JobRow>(
    `UPDATE jobs SET state = 'running', lease_owner = $2, lease_until = $4, started_at = $3
     WHERE id = (
       SELECT id FROM jobs
       WHERE kind = $1 AND (state = 'queued'
         OR (state = 'failed' AND retries_at <= $3)
         OR (state = 'running' AND lease_until <= $3))
       ORDER BY created_at, id LIMIT 1
       FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [claim.kind, claim.owner, claim.now, new Date(claim.now.getTime() + claim.leaseMs)],
  );
  return result.rows[0];
}

/** Says what a running job does now; false when the runner no longer holds it (cancelled). */
export async function reportJob(
  db: Queryable,
  job: Pick<JobRow, 'id' | 'lease_owner'>,
  msg: string,
): Promise<boolean> {
  const result = await db.query(
    `UPDATE jobs SET msg = $3 WHERE id = $1 AND lease_owner = $2 AND state = 'running' RETURNING id`,
    [job.id, job.lease_owner, msg],
  );
  return result.rows.length > 0;
}

/**
 * Ends a running job the runner still holds: `done`, or `failed` with its error code and when
 * it runs again. False when the job was cancelled or taken over meanwhile.
 */
export async function endJob(
  db: Queryable,
  job: Pick<JobRow, 'id' | 'lease_owner'>,
  end: { state: 'done' } | { state: 'failed'; errorCode: string; retriesAt: Date },
  msg: string,
): Promise<JobRow | undefined> {
  const failed = end.state === 'failed';
  const result = await db.query<JobRow>(
    `UPDATE jobs SET state = $3, msg = $4, error_code = $5, retries_at = $6,
       attempts = attempts + $7, lease_owner = NULL, lease_until = NULL
     WHERE id = $1 AND lease_owner = $2 AND state = 'running' RETURNING *`,
    [
      job.id,
      job.lease_owner,
      end.state,
      msg,
      failed ? end.errorCode : null,
      failed ? end.retriesAt : null,
      failed ? 1 : 0,
    ],
  );
  return result.rows[0];
}

/** Queues a job for a subject unless it has an unfinished one; the job when queued. */
export async function queueJobOnce(
  db: Queryable,
  job: { accountId: string; kind: string; subjectId: string; msg: string; now: Date },
): Promise<JobRow | undefined> {
  const result = await db.query<JobRow>(
    `INSERT INTO jobs (id, account_id, kind, subject_id, state, msg, started_at, created_at)
     VALUES ($1, $2, $3, $4, 'queued', $5, $6, $6)
     ON CONFLICT (subject_id) WHERE state IN ('queued', 'running', 'failed') DO NOTHING
     RETURNING *`,
    [newId('job'), job.accountId, job.kind, job.subjectId, job.msg, job.now],
  );
  return result.rows[0];
}

/**
 * Makes the failed jobs of `kind` whose message starts with `msgPrefix` due at `now`: those that
 * waited for something a restart may have brought (a setting), not for their backoff.
 */
export async function retryFailedJobs(
  db: Queryable,
  kind: string,
  msgPrefix: string,
  now: Date,
): Promise<number> {
  const result = await db.query(
    `UPDATE jobs SET retries_at = $3
     WHERE kind = $1 AND state = 'failed' AND starts_with(msg, $2) AND retries_at > $3
     RETURNING id`,
    [kind, msgPrefix, now],
  );
  return result.rows.length;
}
