import { newId } from '../ids.ts';
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
