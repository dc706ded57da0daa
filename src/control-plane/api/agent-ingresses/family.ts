import { checkClaim, domainTaken } from '../../../shared/domains/claim-check.ts';
import {
  type AgentIngressRow,
  type CertPolicy,
  insertAgentIngress,
  updateAgentIngress,
} from '../../../store/agent-ingresses.ts';
import { isUniqueViolation } from '../../../store/db.ts';
import { activeJobs, cancelJobs } from '../../../store/jobs.ts';
import {
  certPolicy,
  queueProvisioning,
  recheckDelegation,
  samePolicy,
} from '../../certs/policy.ts';
import { presentJob } from '../../certs/subjects.ts';
import type { Family, StoredObject } from '../objects/family.ts';
import { ownTable } from '../objects/storage.ts';
import { normalizeDomain } from './domain.ts';
import { AGENT_INGRESSES } from './resource.ts';

const POLICY = 'certificate_management_policy';
const STATUS = 'certificate_management_status';

/** The table's row of an ingress object. */
function rowOf(ingress: StoredObject): AgentIngressRow {
  return { ...ingress, domain: domainOf(ingress), cert_policy: policyOf(ingress) };
}
const domainOf = (ingress: StoredObject) => ingress.fields.domain as string;
const policyOf = (ingress: StoredObject) => ingress.fields[POLICY] as CertPolicy | null;

/** The agent_ingresses table; the domain is unique across the service. */
const INGRESS_TABLE = ownTable<AgentIngressRow>({
  table: 'agent_ingresses',
  fields: (row) => ({ domain: row.domain, [POLICY]: row.cert_policy, renews_at: row.renews_at }),
  async insert(tx, ingress) {
    try {
      await insertAgentIngress(tx, rowOf(ingress));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw domainTaken(domainOf(ingress));
    }
  },
  update: (tx, ingress) => updateAgentIngress(tx, rowOf(ingress)),
});

/**
 * Agent Ingresses (docs/decisions.md#resources, #domains): a domain checked and claimed across
 * accounts, and automatic certificates queued as its policy says. ns_targets and region_domains
 * come from the configuration, so a region added there appears on every ingress; both
 * certificate fields are null when the policy is, renews_at null until a certificate is issued.
 */
export const AGENT_INGRESSES_FAMILY: Family = {
  resource: AGENT_INGRESSES,
  storage: () => INGRESS_TABLE,
  async create(body, ctx) {
    const domain = normalizeDomain(body.domain as string, ctx.config.regions);
    await checkClaim(ctx.tx, ctx.config, {
      accountId: ctx.accountId,
      kind: 'agent_ingress',
      domain,
    });
    return { fields: { domain, [POLICY]: certPolicy(body) ?? null } };
  },
  update(_current, body) {
    const policy = certPolicy(body);
    return policy === undefined ? {} : { fields: { [POLICY]: policy } };
  },
  async afterChange(stored, previous, ctx) {
    const policy = policyOf(stored);
    if (previous !== undefined && samePolicy(policyOf(previous), policy)) {
      return recheckDelegation(ctx.tx, stored.id);
    }
    const subject = { id: stored.id, accountId: ctx.accountId, domain: domainOf(stored), policy };
    await queueProvisioning(ctx.tx, subject);
  },
  async beforeDelete(current, ctx) {
    await cancelJobs(ctx.tx, current.id);
  },
  async shown(ingresses, { db, config }) {
    const managed = ingresses.filter((ingress) => policyOf(ingress) !== null);
    const jobs = await activeJobs(
      db,
      managed.map((ingress) => ingress.id),
    );
    return ingresses.map((ingress) => {
      const job = jobs.get(ingress.id);
      const renewsAt = ingress.fields.renews_at as Date | null | undefined;
      return {
        ns_targets: config.nameServers,
        region_domains: config.regions.map((region) => `${region}.${domainOf(ingress)}`),
        [STATUS]:
          policyOf(ingress) === null
            ? null
            : {
                renews_at: renewsAt?.toISOString() ?? null,
                provisioning_job: job === undefined ? null : presentJob(job),
              },
      };
    });
  },
};
