import type { FastifyInstance, FastifyRequest } from 'fastify';
import { checkClaim, domainTaken } from '../../../shared/domains/claim-check.ts';
import { newId } from '../../../shared/ids.ts';
import {
  type AgentIngressRow,
  deleteAgentIngress,
  getAgentIngress,
  insertAgentIngress,
  lockAgentIngress,
  updateAgentIngress,
} from '../../../store/agent-ingresses.ts';
import { isUniqueViolation, type Queryable } from '../../../store/db.ts';
import { activeJobs, cancelJobs } from '../../../store/jobs.ts';
import {
  certPolicy,
  queueProvisioning,
  recheckDelegation,
  samePolicy,
} from '../../certs/policy.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { listRoute } from '../pagination.ts';
import { AGENT_INGRESSES, auditEvent, notFound } from '../resources.ts';
import { acceptPathEchoes, readBody, rejectUnstorableStrings } from '../validate.ts';
import { normalizeDomain } from './domain.ts';
import { presentAgentIngress } from './present.ts';

/** /agent_ingresses CRUD (docs/decisions.md#resources, #domains). */
export async function agentIngressRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
  const { db, config } = deps;
  const base = config.publicUrl;

  /** The audit of a change the caller makes. */
  const audit = (request: FastifyRequest, change: 'created' | 'updated' | 'deleted') => ({
    eventType: auditEvent(AGENT_INGRESSES, change),
    accountId: request.caller.accountId,
    principal: request.caller,
    publicUrl: base,
  });

  /** The resource with its current provisioning job, read in the same transaction. */
  async function present(tx: Queryable, row: AgentIngressRow) {
    const jobs = row.cert_policy === null ? new Map() : await activeJobs(tx, [row.id]);
    return presentAgentIngress(row, jobs.get(row.id), config);
  }

  const provision = (tx: Queryable, row: AgentIngressRow) =>
    queueProvisioning(tx, {
      id: row.id,
      accountId: row.account_id,
      domain: row.domain,
      policy: row.cert_policy,
    });

  app.post('/agent_ingresses', async (request, reply) => {
    const { body, text } = readBody(request.body, AGENT_INGRESSES, 'create');
    const row: AgentIngressRow = {
      id: newId(AGENT_INGRESSES.idPrefix),
      account_id: request.caller.accountId,
      description: text.description ?? '',
      metadata: text.metadata ?? '',
      domain: normalizeDomain(text.domain!, config.regions),
      cert_policy: certPolicy(body) ?? null,
      created_at: new Date(),
    };
    const claim = { accountId: row.account_id, kind: 'agent_ingress', domain: row.domain } as const;
    try {
      const created = await withAudit(db, audit(request, 'created'), async (tx) => {
        await checkClaim(tx, config, claim);
        await insertAgentIngress(tx, row);
        await provision(tx, row);
        return present(tx, row);
      });
      return reply.code(201).send(created);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw domainTaken(row.domain);
    }
  });

  app.get<{ Params: { id: string } }>('/agent_ingresses/:id', async (request) => {
    const row = await getAgentIngress(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(AGENT_INGRESSES, request.params.id);
    return present(db, row);
  });

  listRoute<AgentIngressRow>(app, deps, AGENT_INGRESSES, async (rows) => {
    const managed = rows.filter((row) => row.cert_policy !== null).map((row) => row.id);
    const jobs = await activeJobs(db, managed);
    return rows.map((row) => presentAgentIngress(row, jobs.get(row.id), config));
  });

  app.patch<{ Params: { id: string } }>('/agent_ingresses/:id', async (request) => {
    const { body, text } = readBody(request.body, AGENT_INGRESSES, 'update');
    const { description, metadata } = text;
    const policy = certPolicy(body);
    const { accountId } = request.caller;
    return withAudit(db, audit(request, 'updated'), async (tx) => {
      const row = await lockAgentIngress(tx, accountId, request.params.id);
      if (row === undefined) throw notFound(AGENT_INGRESSES, request.params.id);
      const updated: AgentIngressRow = {
        ...row,
        description: description ?? row.description,
        metadata: metadata ?? row.metadata,
        cert_policy: policy === undefined ? row.cert_policy : policy,
      };
      await updateAgentIngress(tx, updated);
      if (!samePolicy(row.cert_policy, updated.cert_policy)) await provision(tx, updated);
      else await recheckDelegation(tx, updated.id);
      return present(tx, updated);
    });
  });

  app.delete<{ Params: { id: string } }>('/agent_ingresses/:id', async (request, reply) => {
    await withAudit(db, audit(request, 'deleted'), async (tx) => {
      const row = await deleteAgentIngress(tx, request.caller.accountId, request.params.id);
      if (row === undefined) throw notFound(AGENT_INGRESSES, request.params.id);
      const object = await present(tx, row);
      await cancelJobs(tx, row.id);
      return object;
    });
    return reply.code(204).send();
  });
}
