import { randomBytes } from 'node:crypto';
import { checkClaim } from '../../../shared/domains/claim-check.ts';
import { AppError } from '../../../shared/errors.ts';
import type { CertPolicy } from '../../../store/agent-ingresses.ts';
import { cancelJobs } from '../../../store/jobs.ts';
import { certPolicy, queueProvisioning, samePolicy } from '../../certs/policy.ts';
import { normalizeDomain } from '../agent-ingresses/domain.ts';
import type { Family } from '../objects/family.ts';
import { RESERVED_DOMAINS } from './resource.ts';

const POLICY = 'certificate_management_policy';
const STATUS = 'certificate_management_status';

/** A random DNS label for CNAME targets (base32, 16 characters). */
function randomLabel(): string {
  return randomBytes(10).toString('hex').slice(0, 16);
}

/** The domain lower-cased and checked; a leading `*.` is kept (custom domains only). */
function readDomain(raw: string, serviceDomain: string): { domain: string; custom: boolean } {
  const wildcard = raw.startsWith('*.');
  const name = normalizeDomain(wildcard ? raw.slice(2) : raw, []);
  const custom = name !== serviceDomain && !name.endsWith(`.${serviceDomain}`);
  if (wildcard && !custom) {
    throw new AppError(
      'ERR_INVALID_DOMAIN',
      `"domain": wildcards are for custom domains, not names under ${serviceDomain}`,
      { field: 'domain' },
    );
  }
  return { domain: wildcard ? `*.${name}` : name, custom };
}

/** The status of a new policy: its job queued, no certificate yet (null: not managed). */
function queuedStatus(policy: CertPolicy | null, domain: string) {
  if (policy === null) return null;
  const job = { msg: `certificate provisioning for ${domain} is queued`, retries_at: null };
  return { renews_at: null, provisioning_job: { ...job, started_at: new Date().toISOString() } };
}

/** Refuses an uploaded certificate together with automatic ones: one must serve the domain. */
function checkOneSource(certificate: unknown, policy: CertPolicy | null): void {
  if (certificate != null && policy !== null) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${POLICY}" must be null while "certificate_id" names an uploaded certificate`,
      { field: POLICY },
    );
  }
}

/** Reserved domains: a hostname of the service's or a custom one, its CNAME and certificate. */
export const RESERVED_DOMAINS_FAMILY: Family = {
  resource: RESERVED_DOMAINS,
  async create(body, ctx) {
    const { domain, custom } = readDomain(body.domain as string, ctx.config.serviceDomain);
    // ngrok's clients send "" for the deprecated region they do not set.
    const region = (body.region as string | null | undefined) || null;
    if (region !== null && !ctx.config.regions.includes(region)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"region" must be null or one of ${ctx.config.regions.join(', ')}`,
        { field: 'region' },
      );
    }
    const policy = certPolicy(body) ?? null;
    checkOneSource(body.certificate_id, policy);
    await checkClaim(ctx.tx, ctx.config, {
      accountId: ctx.accountId,
      kind: 'reserved_domain',
      domain,
    });
    const target = (zone: string) => `${randomLabel()}.${zone}.${ctx.config.serviceDomain}`;
    return {
      fields: {
        domain,
        region,
        cname_target: custom ? target('cname') : null,
        [POLICY]: policy,
        [STATUS]: queuedStatus(policy, domain),
        acme_challenge_cname_target: custom && domain.startsWith('*.') ? target('acme') : null,
      },
      unique: { key: domain, scope: 'service', field: 'domain' },
    };
  },
  update(current, body) {
    const given = certPolicy(body);
    const policy = given === undefined ? (current.fields[POLICY] as CertPolicy | null) : given;
    const certificate =
      body.certificate_id === undefined ? current.fields.certificate : body.certificate_id;
    checkOneSource(certificate, policy);
    if (samePolicy(policy, current.fields[POLICY] as CertPolicy | null)) return {};
    return {
      fields: { [POLICY]: policy, [STATUS]: queuedStatus(policy, current.fields.domain as string) },
    };
  },
  async afterChange(stored, previous, ctx) {
    const policy = stored.fields[POLICY] as CertPolicy | null;
    if (previous !== undefined && samePolicy(policy, previous.fields[POLICY] as CertPolicy | null))
      return;
    await queueProvisioning(ctx.tx, {
      id: stored.id,
      accountId: stored.account_id,
      domain: stored.fields.domain as string,
      policy,
    });
  },
  async beforeDelete(current, ctx) {
    await cancelJobs(ctx.tx, current.id);
  },
  clear: {
    certificate: () => ({ fields: { certificate: null } }),
    [POLICY]: () => ({ fields: { [POLICY]: null, [STATUS]: null } }),
  },
};
