import type { FastifyInstance } from 'fastify';
import { AppError } from '../../errors.ts';
import { newId } from '../../ids.ts';
import {
  type AgentIngressRow,
  type CertPolicy,
  deleteAgentIngress,
  getAgentIngress,
  insertAgentIngress,
  lockAgentIngress,
  updateAgentIngress,
} from '../../store/agent-ingresses.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import { activeJobs, cancelJobs, queueJob } from '../../store/jobs.ts';
import { selectPage } from '../../store/pages.ts';
import { withAudit } from '../audit.ts';
import type { ApiDeps } from '../deps.ts';
import { pageLinks, parsePageQuery } from '../pagination.ts';
import {
  acceptPathEchoes,
  choiceField,
  DESCRIPTION_BYTES,
  type JsonObject,
  METADATA_BYTES,
  objectWith,
  rejectUnstorableStrings,
  stringField,
} from '../validate.ts';
import { normalizeDomain } from './domain.ts';
import { presentAgentIngress } from './present.ts';

const CREATE_FIELDS = ['description', 'metadata', 'domain', 'certificate_management_policy'];
const UPDATE_FIELDS = ['description', 'metadata', 'certificate_management_policy'];
const POLICY = 'certificate_management_policy';
const PROVISIONING_JOB = 'certificate_provisioning';

function notFound(id: string): AppError {
  return new AppError('ERR_NOT_FOUND', `Agent Ingress "${id}" was not found`, { id });
}

/** Reads certificate_management_policy: null disables management; private_key_type defaults to rsa. */
function certPolicy(body: JsonObject): CertPolicy | null | undefined {
  const value = body[POLICY];
  if (value === undefined || value === null) return value;
  const policy = objectWith(value, ['authority', 'private_key_type'], POLICY);
  const authority = choiceField(policy, 'authority', ['letsencrypt'], `${POLICY}.authority`);
  return {
    authority: authority ?? 'letsencrypt',
    private_key_type:
      choiceField(policy, 'private_key_type', ['rsa', 'ecdsa'], `${POLICY}.private_key_type`) ??
      'rsa',
  };
}

function samePolicy(a: CertPolicy | null, b: CertPolicy | null): boolean {
  return a?.authority === b?.authority && a?.private_key_type === b?.private_key_type;
}

/** /agent_ingresses CRUD per SPEC.md and DESIGN.md §4. */
export async function agentIngressRoutes(
  app: FastifyInstance,
  { db, config }: ApiDeps,
): Promise<void> {
  app.addHook('preValidation', rejectUnstorableStrings);
  app.addHook('preValidation', acceptPathEchoes({ id: 'id' }));
  const base = config.publicUrl;

  /** The resource with its current provisioning job, read in the same transaction. */
  async function present(tx: Queryable, row: AgentIngressRow) {
    const jobs = row.cert_policy === null ? new Map() : await activeJobs(tx, [row.id]);
    return presentAgentIngress(row, jobs.get(row.id), config);
  }

  async function queueProvisioning(tx: Queryable, row: AgentIngressRow): Promise<void> {
    await cancelJobs(tx, row.id);
    if (row.cert_policy === null) return;
    await queueJob(tx, {
      accountId: row.account_id,
      kind: PROVISIONING_JOB,
      subjectId: row.id,
      msg: `certificate provisioning for ${row.domain} is queued`,
    });
  }

  app.post('/agent_ingresses', async (request, reply) => {
    const body = objectWith(request.body, CREATE_FIELDS);
    const row: AgentIngressRow = {
      id: newId('agin'),
      account_id: request.caller.accountId,
      description: stringField(body, 'description', { maxBytes: DESCRIPTION_BYTES }) ?? '',
      metadata: stringField(body, 'metadata', { maxBytes: METADATA_BYTES }) ?? '',
      domain: normalizeDomain(stringField(body, 'domain', { required: true }), config.regions),
      cert_policy: certPolicy(body) ?? null,
      created_at: new Date(),
    };
    const audit = {
      eventType: 'agent_ingress_created.v0',
      accountId: row.account_id,
      principal: request.caller,
      publicUrl: base,
    };
    try {
      const created = await withAudit(db, audit, async (tx) => {
        await insertAgentIngress(tx, row);
        await queueProvisioning(tx, row);
        return present(tx, row);
      });
      return reply.code(201).send(created);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new AppError('ERR_DOMAIN_TAKEN', `the domain "${row.domain}" is already in use`, {
        field: 'domain',
      });
    }
  });

  app.get<{ Params: { id: string } }>('/agent_ingresses/:id', async (request) => {
    const row = await getAgentIngress(db, request.caller.accountId, request.params.id);
    if (row === undefined) throw notFound(request.params.id);
    return present(db, row);
  });

  app.get('/agent_ingresses', async (request) => {
    const query = parsePageQuery(request.query, 'agin');
    const page = await selectPage<AgentIngressRow>(
      db,
      'agent_ingresses',
      request.caller.accountId,
      query.limit,
      query.beforeId,
    );
    const jobs = await activeJobs(
      db,
      page.rows.filter((row) => row.cert_policy !== null).map((row) => row.id),
    );
    return {
      ingresses: page.rows.map((row) => presentAgentIngress(row, jobs.get(row.id), config)),
      ...pageLinks(`${base}/agent_ingresses`, query, page.rows.at(-1)?.id, page.more),
    };
  });

  app.patch<{ Params: { id: string } }>('/agent_ingresses/:id', async (request) => {
    const raw = request.body;
    if (raw !== null && typeof raw === 'object' && 'domain' in raw) {
      throw new AppError(
        'ERR_FIELD_NOT_UPDATABLE',
        '"domain" cannot be changed; create a new Agent Ingress',
        {
          field: 'domain',
        },
      );
    }
    const body = objectWith(raw, UPDATE_FIELDS);
    const description = stringField(body, 'description', { maxBytes: DESCRIPTION_BYTES });
    const metadata = stringField(body, 'metadata', { maxBytes: METADATA_BYTES });
    const policy = certPolicy(body);
    const { accountId } = request.caller;
    const audit = {
      eventType: 'agent_ingress_updated.v0',
      accountId,
      principal: request.caller,
      publicUrl: base,
    };
    return withAudit(db, audit, async (tx) => {
      const row = await lockAgentIngress(tx, accountId, request.params.id);
      if (row === undefined) throw notFound(request.params.id);
      const updated: AgentIngressRow = {
        ...row,
        description: description ?? row.description,
        metadata: metadata ?? row.metadata,
        cert_policy: policy === undefined ? row.cert_policy : policy,
      };
      await updateAgentIngress(tx, updated);
      if (!samePolicy(row.cert_policy, updated.cert_policy)) await queueProvisioning(tx, updated);
      return present(tx, updated);
    });
  });

  app.delete<{ Params: { id: string } }>('/agent_ingresses/:id', async (request, reply) => {
    const { accountId } = request.caller;
    const audit = {
      eventType: 'agent_ingress_deleted.v0',
      accountId,
      principal: request.caller,
      publicUrl: base,
    };
    await withAudit(db, audit, async (tx) => {
      const row = await deleteAgentIngress(tx, accountId, request.params.id);
      if (row === undefined) throw notFound(request.params.id);
      const object = await present(tx, row);
      await cancelJobs(tx, row.id);
      return object;
    });
    return reply.code(204).send();
  });
}
