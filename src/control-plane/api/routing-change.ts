import type { FastifyRequest } from 'fastify';
import { bumpPipelineVersion } from '../../data-plane/store/pipeline-config.ts';
import type { Queryable } from '../../store/db.ts';
import { withAudit } from './audit.ts';
import type { ApiDeps } from './deps.ts';

/**
 * Runs a change to subscriptions or destinations: its audit event and the routing version bump
 * commit with it, then the pipeline is told (a failed notice is logged: the change stands, and
 * the version poll catches up). `work` returns the object as the audit event shows it.
 */
export async function routingChange<T>(
  deps: ApiDeps,
  request: FastifyRequest,
  eventType: string,
  work: (tx: Queryable) => Promise<T>,
): Promise<T> {
  const audit = {
    eventType,
    accountId: request.caller.accountId,
    principal: request.caller,
    publicUrl: deps.config.publicUrl,
  };
  const object = await withAudit(deps.db, audit, async (tx) => {
    const result = await work(tx);
    await bumpPipelineVersion(tx);
    return result;
  });
  try {
    deps.onPipelineChange?.();
  } catch (error) {
    request.log.error({ err: error }, 'pipeline change notification failed');
  }
  return object;
}
