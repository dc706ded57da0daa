import type { Config } from '../../../config/load.ts';
import type { AgentIngressRow } from '../../../store/agent-ingresses.ts';
import type { JobRow } from '../../../store/jobs.ts';

/** A provisioning job as AgentIngressCertJob; error_code is present only while failing. */
export function presentJob(job: JobRow) {
  return {
    ...(job.error_code === null ? {} : { error_code: job.error_code }),
    msg: job.msg,
    started_at: job.started_at.toISOString(),
    retries_at: job.retries_at === null ? null : job.retries_at.toISOString(),
  };
}

/**
 * The AgentIngress resource. ns_targets and region_domains come from the configuration, so a
 * region added there appears on every ingress. Both certificate fields are null when the
 * policy is; renews_at stays null until a certificate has been issued.
 */
export function presentAgentIngress(
  row: AgentIngressRow,
  job: JobRow | undefined,
  config: Pick<Config, 'publicUrl' | 'nameServers' | 'regions'>,
) {
  return {
    id: row.id,
    uri: `${config.publicUrl}/agent_ingresses/${row.id}`,
    description: row.description,
    metadata: row.metadata,
    domain: row.domain,
    ns_targets: config.nameServers,
    region_domains: config.regions.map((region) => `${region}.${row.domain}`),
    created_at: row.created_at.toISOString(),
    certificate_management_policy: row.cert_policy,
    certificate_management_status:
      row.cert_policy === null
        ? null
        : {
            renews_at: row.renews_at?.toISOString() ?? null,
            provisioning_job: job === undefined ? null : presentJob(job),
          },
  };
}
