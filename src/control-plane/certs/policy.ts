import type { CertPolicy } from '../../store/agent-ingresses.ts';
import type { Queryable } from '../../store/db.ts';
import { cancelJobs, queueJob } from '../../store/jobs.ts';
import type { JsonObject } from '../api/resource-types.ts';

// certificate_management_policy, as Agent Ingresses and reserved domains take it: null turns
// automatic certificates off; a change queues a provisioning job (the certificate issue runs it).

const POLICY = 'certificate_management_policy';
export const PROVISIONING_JOB = 'certificate_provisioning';

/** The policy of a checked body with its defaults: undefined when not given, null when off. */
export function certPolicy(body: JsonObject): CertPolicy | null | undefined {
  const value = body[POLICY];
  if (value === undefined || value === null) return value;
  const policy = value as Partial<CertPolicy>;
  return {
    authority: policy.authority ?? 'letsencrypt',
    private_key_type: policy.private_key_type ?? 'rsa',
  };
}

/** True when two policies ask for the same certificate. */
export function samePolicy(a: CertPolicy | null, b: CertPolicy | null): boolean {
  return a?.authority === b?.authority && a?.private_key_type === b?.private_key_type;
}

/** Replaces the subject's provisioning job by one for `policy` (none when it is null). */
export async function queueProvisioning(
  tx: Queryable,
  subject: { id: string; accountId: string; domain: string; policy: CertPolicy | null },
): Promise<void> {
  await cancelJobs(tx, subject.id);
  if (subject.policy === null) return;
  await queueJob(tx, {
    accountId: subject.accountId,
    kind: PROVISIONING_JOB,
    subjectId: subject.id,
    msg: `certificate provisioning for ${subject.domain} is queued`,
  });
}

/**
 * Makes a subject's job that waits for its delegation due now: a PATCH is when a user who has
 * just published the NS records expects the service to look again.
 */
export async function recheckDelegation(tx: Queryable, subjectId: string): Promise<void> {
  await tx.query(
    `UPDATE jobs SET retries_at = $2
     WHERE subject_id = $1 AND state = 'failed' AND error_code = 'DNS_ERROR'`,
    [subjectId, new Date()],
  );
}
