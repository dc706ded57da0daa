import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { SessionRegistry } from './agent-plane/sessions/registry.ts';
import { STOP_REASONS } from './agent-plane/sessions/session-events.ts';
import type { Config } from './config/load.ts';
import { type RouteTable, restApi } from './control-plane/api/index.ts';
import { createLongLivedAnswers } from './control-plane/api/long-lived.ts';
import { openApiDocument } from './control-plane/api/openapi.ts';
import { consoleRoutes } from './control-plane/console/routes.ts';
import { ingestPlugin } from './data-plane/ingest/ingest-plugin.ts';
import type { Pipeline } from './data-plane/pipeline/pipeline.ts';
import { type ConnectionLimits, capServer } from './shared/http/connection-limits.ts';
import { createConnections } from './shared/http/connections.ts';
import { frameworkErrors, installErrorHandlers } from './shared/http/http-errors.ts';
import { newId } from './shared/ids.ts';
import type { Logger } from './shared/logger.ts';
import type { Metrics } from './shared/metrics.ts';
import type { RestrictionCache } from './shared/net/restriction-cache.ts';
import type { Keyring } from './shared/secrets.ts';
import { createTokenSet } from './shared/tokens.ts';
import type { Db } from './store/db.ts';

/** What the HTTP server is built from. */
export interface AppDeps {
  config: Config;
  db: Db;
  logger: Logger;
  pipeline: Pipeline;
  metrics: Metrics;
  keyring: Keyring;
  /** MAX_CONNECTIONS and the open-file limit, shared by every listener of the process. */
  connectionLimits: ConnectionLimits;
  /** Live agent sessions, for /tunnel_sessions; absent without an agent listener. */
  sessions?: SessionRegistry;
  /** The accounts' IP restrictions, shared with the agent listener and the edge. */
  ipRestrictions?: RestrictionCache;
  /** Called after each committed REST transaction (zone data may have changed, a job queued). */
  onCommit?: () => void;
}

/**
 * No route declares a JSON schema (src/api/validate.ts checks bodies), so Fastify is given
 * compilers that refuse one instead of loading Ajv and fast-json-stringify (~80 ms of start-up).
 */
const NO_SCHEMAS = {
  compilersFactory: {
    buildValidator: refuseSchema,
    buildSerializer: refuseSchema,
  },
};

function refuseSchema(): never {
  throw new Error('routes of this service declare no JSON schemas');
}

/** The Fastify instance: health, the REST API and the Connect ingest service, each registered explicitly. */
export async function buildApp({
  config,
  db,
  logger,
  pipeline,
  metrics,
  keyring,
  connectionLimits,
  sessions,
  ipRestrictions,
  onCommit,
}: AppDeps): Promise<{ app: FastifyInstance; routes: RouteTable }> {
  const connections = createConnections(config, logger, connectionLimits);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.maxBodyBytes,
    genReqId: () => newId('op'),
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors,
    ...connections.serverOptions,
    schemaController: NO_SCHEMAS,
  });
  installErrorHandlers(app);
  connections.install(app);
  const routes: RouteTable = [];
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/metrics', async (_request, reply) => {
    pipeline.refreshGauges();
    return reply
      .header('content-type', metrics.registry.contentType)
      .send(await metrics.registry.metrics());
  });
  app.get('/readyz', async (_request, reply) => {
    try {
      await db.query('SELECT 1');
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable', reason: 'store does not answer' });
    }
  });
  // Every committed REST transaction may have written an audit event: wake the relay at once.
  const apiDb: Db = {
    ...db,
    transaction: (work) =>
      db.transaction(work).then((result) => {
        pipeline.relay.kick();
        onCommit?.();
        return result;
      }),
  };
  // The REST API's OpenAPI document, built from the resource declarations; no API key needed.
  const openApi = openApiDocument(config.publicUrl);
  app.get('/openapi.json', async () => openApi);
  // The operator's console: static files; the page calls the REST API with its own key.
  await app.register(consoleRoutes);
  await app.register(restApi, {
    db: apiDb,
    config,
    keyring,
    routes,
    destinationHealth: pipeline.destinationHealth,
    testDestination: pipeline.testDestination,
    taps: pipeline.taps,
    stats: pipeline.stats,
    // Sized for the listener's cap as the open-file limit leaves it.
    longLived: createLongLivedAnswers(connectionLimits.perListener),
    sessions,
    ipRestrictions,
    onObjectDeleted: (kind, id) => endSessionsOf(sessions, kind, id),
    onPipelineChange: () => {
      pipeline.reload().catch((error) => logger.error({ err: error }, 'pipeline reload failed'));
    },
  });
  await app.register(ingestPlugin, ingestOptions({ config, pipeline, metrics }));
  return { app, routes };
}

/** A deleted credential (tunnel or SSH) ends the sessions it started. */
function endSessionsOf(sessions: SessionRegistry | undefined, kind: string, id: string): void {
  if (kind !== 'credentials' && kind !== 'ssh_credentials') return;
  for (const session of sessions?.all() ?? []) {
    if (session.facts.credential.id === id) void session.end(STOP_REASONS.credentialDeleted);
  }
}

function ingestOptions({
  config,
  pipeline,
  metrics,
}: Pick<AppDeps, 'config' | 'pipeline' | 'metrics'>) {
  return {
    pipeline,
    isIngestToken: createTokenSet(config.ingestTokens),
    metrics,
    maxIngestBytes: config.maxIngestBytes,
    maxStreamEvents: config.maxStreamEvents,
    maxStreamBytes: config.maxStreamBytes,
    streamIdleTimeoutMs: config.streamIdleTimeoutMs,
  };
}

/**
 * The HTTP/2 cleartext (h2c) listener for gRPC edge clients: Node cannot serve HTTP/1.1 and h2c
 * on one port, so gRPC gets its own (GRPC_PORT); Connect and gRPC-Web stay on the main port.
 */
export async function buildGrpcApp(
  deps: Pick<AppDeps, 'config' | 'pipeline' | 'metrics' | 'logger' | 'connectionLimits'>,
) {
  // Typed as the HTTP/1 instance: the ingest plugin uses only what both request kinds share.
  const app = Fastify({
    http2: true,
    loggerInstance: deps.logger as FastifyBaseLogger,
    genReqId: () => newId('op'),
    return503OnClosing: false,
    forceCloseConnections: true,
    http2SessionTimeout: deps.config.keepAliveTimeoutMs,
    schemaController: NO_SCHEMAS,
  }) as unknown as FastifyInstance;
  // No HTTP/1.1 answer is possible before an HTTP/2 session: connections beyond are closed.
  const limits = deps.connectionLimits;
  capServer(app.server, limits.listener('grpc'), (socket) => limits.turnAway('grpc', socket));
  installErrorHandlers(app);
  await app.register(ingestPlugin, ingestOptions(deps));
  return app;
}
