import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from './deps.ts';
import { TOP_LEVEL_ROUTES } from './resources.ts';

const [WHOAMI] = TOP_LEVEL_ROUTES;

/** GET /account: the calling key's account, so a caller learns the account_id it publishes as. */
export async function accountRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  app.get(WHOAMI.path, async (request) => ({
    id: request.caller.accountId,
    uri: `${deps.config.publicUrl}${WHOAMI.path}`,
  }));
}
