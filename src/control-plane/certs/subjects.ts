import type { Config } from '../../config/load.ts';
import type { CertPolicy } from '../../store/agent-ingresses.ts';
import type { Queryable } from '../../store/db.ts';
import type { JobRow } from '../../store/jobs.ts';

// What a provisioning job certifies: an Agent Ingress (its domain, region domains and wildcards
// under them; the certificate and renews_at in its row) or a reserved domain (its name; status,
// certificate and renews_at in its fields).

const STATUS = 'certificate_management_status';

/** A provisioning job as a certificate status shows it; error_code only while failing. */
export function presentJob(job: JobRow) {
  return {
    ...(job.error_code === null ? {} : { error_code: job.error_code }),
    msg: job.msg,
    started_at: job.started_at.toISOString(),
    retries_at: job.retries_at === null ? null : job.retries_at.toISOString(),
  };
}

/** The object a job provisions a certificate for. */
export interface CertSubject {
  kind: 'agent_ingress' | 'reserved_domain';
  id: string;
  accountId: string;
  domain: string;
  policy: CertPolicy | null;
  /** The names the certificate covers. */
  names: string[];
  /** Where the DNS-01 TXT records of a name go (`_acme-challenge.<name>`, or a CNAME target). */
  challengeNames(identifier: string): string[];
  /** True when the domain must be delegated to the service's name servers (checked first). */
  needsDelegation: boolean;
  /** The automatic certificate it has, if any. */
  certificateId: string | null;
}

async function ingressSubject(db: Queryable, id: string, config: Pick<Config, 'regions'>) {
  const result = await db.query<{
    account_id: string;
    domain: string;
    cert_policy: CertPolicy | null;
    certificate_id: string | null;
  }>('SELECT account_id, domain, cert_policy, certificate_id FROM agent_ingresses WHERE id = $1', [
    id,
  ]);
  const row = result.rows[0];
  if (row === undefined) return undefined;
  const regions = config.regions.map((region) => `${region}.${row.domain}`);
  return {
    kind: 'agent_ingress' as const,
    id,
    accountId: row.account_id,
    domain: row.domain,
    policy: row.cert_policy,
    names: [row.domain, ...regions.flatMap((name) => [name, `*.${name}`])],
    challengeNames: (identifier: string) => [`_acme-challenge.${identifier}`],
    needsDelegation: true,
    certificateId: row.certificate_id,
  };
}

async function reservedSubject(db: Queryable, id: string) {
  const result = await db.query<{ account_id: string; fields: Record<string, unknown> }>(
    `SELECT account_id, fields FROM account_objects WHERE id = $1 AND kind = 'reserved_domains'`,
    [id],
  );
  const row = result.rows[0];
  if (row === undefined) return undefined;
  const domain = row.fields.domain as string;
  const acmeTarget = row.fields.acme_challenge_cname_target as string | null;
  return {
    kind: 'reserved_domain' as const,
    id,
    accountId: row.account_id,
    domain,
    policy: row.fields.certificate_management_policy as CertPolicy | null,
    names: [domain],
    // A custom wildcard's owner CNAMEs _acme-challenge.<domain> to the target this service answers.
    challengeNames: (identifier: string) => [
      `_acme-challenge.${identifier}`,
      ...(acmeTarget ? [acmeTarget] : []),
    ],
    needsDelegation: false,
    certificateId: (row.fields.managed_certificate_id as string | undefined) ?? null,
  };
}

/** The subject of a job, or undefined when it was deleted. */
export async function loadSubject(
  db: Queryable,
  subjectId: string,
  config: Pick<Config, 'regions'>,
): Promise<CertSubject | undefined> {
  return (await ingressSubject(db, subjectId, config)) ?? (await reservedSubject(db, subjectId));
}

/** Records the subject's new automatic certificate and when it renews. */
export async function recordCertificate(
  tx: Queryable,
  subject: CertSubject,
  certificateId: string,
  renewsAt: Date,
): Promise<void> {
  if (subject.kind === 'agent_ingress') {
    await tx.query('UPDATE agent_ingresses SET certificate_id = $2, renews_at = $3 WHERE id = $1', [
      subject.id,
      certificateId,
      renewsAt,
    ]);
    return;
  }
  await tx.query(
    `UPDATE account_objects SET fields = fields || jsonb_build_object('managed_certificate_id', $2::text)
     WHERE id = $1`,
    [subject.id, certificateId],
  );
  await showStatus(tx, subject, undefined, renewsAt);
}

/**
 * A reserved domain shows its status from its fields: the job as it is now (null once done) and
 * renews_at (kept when undefined). Agent Ingresses read theirs from the jobs table instead.
 */
export async function showStatus(
  tx: Queryable,
  subject: Pick<CertSubject, 'kind' | 'id'>,
  job: JobRow | undefined,
  renewsAt?: Date,
): Promise<void> {
  if (subject.kind !== 'reserved_domain') return;
  const provisioning = job === undefined || job.state === 'done' ? null : presentJob(job);
  await tx.query(
    `UPDATE account_objects SET fields = jsonb_set(fields, '{${STATUS}}', jsonb_build_object(
       'renews_at', COALESCE($3::text, fields->'${STATUS}'->>'renews_at'),
       'provisioning_job', $2::jsonb))
     WHERE id = $1 AND fields->'${STATUS}' IS NOT NULL AND fields->'${STATUS}' != 'null'::jsonb`,
    [subject.id, JSON.stringify(provisioning), renewsAt?.toISOString() ?? null],
  );
}
