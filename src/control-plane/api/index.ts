import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../shared/errors.ts';
import { createIpRestrictions } from '../../shared/net/account-restrictions.ts';
import { createApiKeyAuth } from '../api-key-auth.ts';
import { accountRoutes } from './account.ts';
import type { ApiDeps } from './deps.ts';
import {
  createIpRestrictionHook,
  createRestrictionInvalidation,
} from './ip-restrictions/enforce.ts';
import { createLongLivedAnswers } from './long-lived.ts';
import { FAMILIES } from './objects/families.ts';
import { familyRoutes } from './objects/routes.ts';
import { createRateLimitHook } from './rate-limit.ts';
import { tapRoutes } from './tap/routes.ts';
import { tunnelSessionRoutes } from './tunnel-sessions/routes.ts';
import { tunnelRoutes } from './tunnels/routes.ts';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * True when an HTTP/1.x request carries no body at all (neither Content-Length nor
 * Transfer-Encoding): ngrok's clients send DELETE so, with Content-Type: application/json.
 * `Content-Length: 0` with that type is an empty JSON document, which stays malformed.
 */
function hasNoBody(request: FastifyRequest): boolean {
  const { headers, raw } = request;
  return (
    raw.httpVersionMajor === 1 &&
    headers['content-length'] === undefined &&
    headers['transfer-encoding'] === undefined
  );
}

/** Every REST route of the API (method and URL pattern), for docs and the isolation sweep. */
export type RouteTable = { method: string; url: string }[];

/**
 * The REST API: every route needs an API key; JSON bodies only; a known path with another
 * method answers 405 with Allow. Resources are registered explicitly, in order.
 */
export async function restApi(
  app: FastifyInstance,
  options: Omit<ApiDeps, 'longLived'> &
    Partial<Pick<ApiDeps, 'longLived'>> & { routes: RouteTable },
): Promise<void> {
  const longLived = options.longLived ?? createLongLivedAnswers(options.config.maxConnections);
  const deps = { ...options, longLived };
  const methodsByUrl = new Map<string, Set<string>>();
  let collecting = true;
  app.addHook('onRoute', (route) => {
    if (!collecting) return;
    const methods = methodsByUrl.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) if (method !== 'HEAD') methods.add(method);
    methodsByUrl.set(route.url, methods);
  });
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  // ngrok's API client posts the bare path id (not JSON) as the body of actions such as
  // POST /tunnel_sessions/{id}/restart: the id said again, taken as no body.
  const isIdEcho = (request: FastifyRequest, body: string) =>
    body !== '' && body === (request.params as { id?: string } | undefined)?.id;
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
    hasNoBody(request) || isIdEcho(request, body as string)
      ? done(null, undefined)
      : parseJson(request, body as string, done),
  );
  // ngrok's clients read the operation id from this header, on answers and errors alike.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('ngrok-operation-id', request.id);
  });
  app.addHook('onRequest', createApiKeyAuth(deps.db));
  // After auth (the key names the account) and before the rate limit (a refused caller spends
  // no budget of the key's legitimate users).
  const ipRestrictions =
    deps.ipRestrictions ?? createIpRestrictions(deps.db, deps.config.ipRestrictionCacheTtlMs);
  app.addHook('onRequest', createIpRestrictionHook(ipRestrictions));
  app.addHook('onSend', createRestrictionInvalidation(ipRestrictions));
  // After auth, so the limit is per API key and unauthenticated requests spend no one's budget.
  app.addHook(
    'onRequest',
    createRateLimitHook({
      perSecond: deps.config.rateLimitPerSecond,
      burst: deps.config.rateLimitBurst,
    }),
  );

  for (const family of FAMILIES) await app.register(familyRoutes(family), deps);
  await app.register(accountRoutes, deps);
  await app.register(tapRoutes, deps);
  await app.register(tunnelSessionRoutes(deps.sessions), deps);
  await app.register(tunnelRoutes, deps);

  collecting = false;
  for (const [url, methods] of methodsByUrl) {
    for (const method of methods) deps.routes.push({ method, url });
    const others = METHODS.filter((method) => !methods.has(method));
    if (others.length === 0) continue;
    const allowed = [...methods];
    app.route({
      method: others,
      url,
      handler: async (request) => {
        throw new AppError('ERR_METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${url}`, {
          allowed,
        });
      },
    });
  }
}
