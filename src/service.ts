import type { FastifyInstance } from 'fastify';
import type { AuthoritativeDns } from './agent-plane/dns/index.ts';
import { type Edge, startEdge } from './agent-plane/edge/edge-server.ts';
import { createEdgePublisher, type EdgePublisher } from './agent-plane/edge/publisher.ts';
import { createRelayAuth, type RelayAuth } from './agent-plane/edge/relay-auth.ts';
import { createRelayClient, relayStop } from './agent-plane/edge/relay-client.ts';
import { type RelayListener, startRelayListener } from './agent-plane/edge/relay-listener.ts';
import {
  createSniCertificates,
  type SniCertificates,
} from './agent-plane/edge/sni-certificates.ts';
import { openTcpEndpoint } from './agent-plane/edge/tcp-endpoint.ts';
import { createEndpointPolicies, type EndpointPolicies } from './agent-plane/policy/index.ts';
import type { DecideEndpointIp, IpAllowed } from './agent-plane/sessions/ip-allowed.ts';
import type { AgentListener, AgentListenerDeps } from './agent-plane/sessions/listener.ts';
import { createSessionRegistry, type SessionRegistry } from './agent-plane/sessions/registry.ts';
import { buildApp, buildGrpcApp } from './app.ts';
import type { Config } from './config/load.ts';
import type { RouteTable } from './control-plane/api/index.ts';
import { bootstrapFirstKey } from './control-plane/bootstrap.ts';
import { type CertRunner, createCertRunner } from './control-plane/certs/runner.ts';
import { createPipeline, type Pipeline } from './data-plane/pipeline/pipeline.ts';
import { migrateFileLayout } from './data-plane/sinks/file/layout.ts';
import { SINKS } from './data-plane/sinks/index.ts';
import {
  fileDestinationPaths,
  resealDestinationSecrets,
} from './data-plane/store/event-destinations.ts';
import { prepareDataDir } from './shared/files/data-dir.ts';
import {
  type ConnectionLimits,
  createConnectionLimits,
  listenersOf,
  openFileLimit,
} from './shared/http/connection-limits.ts';
import type { Logger } from './shared/logger.ts';
import { createMetrics, type Metrics } from './shared/metrics.ts';
import { createIpRestrictions } from './shared/net/account-restrictions.ts';
import { type Keyring, loadKeyring } from './shared/secrets.ts';
import { resealObjectSecrets } from './store/account-objects.ts';
import type { Db } from './store/db.ts';
import { openStore } from './store/index.ts';

/** A running service: its HTTP server, where it listens, and how to stop it gracefully. */
export interface Service {
  app: FastifyInstance;
  db: Db;
  pipeline: Pipeline;
  /** Seals and opens destination secrets (SECRETS_KEY or DATA_DIR/secrets.key). */
  keyring: Keyring;
  routes: RouteTable;
  url: string;
  /** Where gRPC (HTTP/2) edge clients connect, when GRPC_PORT is set. */
  grpcUrl: string | undefined;
  /** Where agents connect over SSH (SSH_PORT), when the agent listener runs. */
  sshPort: number | undefined;
  /** Where the edge serves HTTP for agents' hostnames (EDGE_HTTP_PORT), when it runs. */
  edgePort: number | undefined;
  /** Where the edge serves HTTPS, certificates chosen by SNI (EDGE_HTTPS_PORT), when it runs. */
  edgeHttpsPort: number | undefined;
  /** The live agent sessions of this instance. */
  sessions: SessionRegistry;
  /** The authoritative DNS server, when DNS_PORT is set. */
  dns: AuthoritativeDns | undefined;
  /** The certificate job runner (CERT_POLL_MS > 0), whose `kick()` runs due jobs now. */
  certs: CertRunner | undefined;
  /** The first API key, when this start created it (empty store). */
  firstKey: Awaited<ReturnType<typeof bootstrapFirstKey>>;
  /** Stops accepting, lets requests in flight finish, flushes the pipeline, closes the store. */
  close(): Promise<void>;
}

/** Opens the store, creates the first key on an empty store, starts the pipeline, and listens. */
export async function startService(config: Config, logger: Logger): Promise<Service> {
  await prepareDataDir(config.dataDir, logger);
  const keyring = await loadKeyring(config);
  const db = await openStore(config);
  let pipeline: Pipeline | undefined;
  let agents: Awaited<ReturnType<typeof startAgents>> | undefined;
  let registry: SessionRegistry | undefined;
  try {
    const resealed = await resealDestinationSecrets(db, keyring);
    const resealedObjects = await resealObjectSecrets(db, keyring);
    if (resealed + resealedObjects > 0) {
      logger.info({ destinations: resealed, objects: resealedObjects }, 'secrets re-encrypted');
    }
    await migrateFileLayout(config.dataDir, () => fileDestinationPaths(db), logger);
    const firstKey = await bootstrapFirstKey(db, config);
    const metrics = createMetrics({
      storeWasmMemoryBytes: () => db.wasmMemoryBytes(),
      sinkKinds: SINKS.map((sink) => sink.kind),
    });
    const connectionLimits = createConnectionLimits({
      maxConnections: config.maxConnections,
      listeners: listenersOf(config),
      openFiles: openFileLimit(),
      metrics,
      logger,
    });
    pipeline = await createPipeline({ db, config, logger, metrics, keyring });
    const relayAuth = createRelayAuth(keyring);
    const sessions = createSessionRegistry({
      db,
      logger,
      maxPerAccount: config.maxSessionsPerAccount,
      leaseMs: config.sessionLeaseMs,
      internalUrl: config.internalUrl,
      stopElsewhere: (owner, id, principal) => relayStop(relayAuth, owner, id, principal),
    });
    registry = sessions;
    // One cache of IP restrictions: a change through the API applies at once to agents and edge.
    const ipRestrictions = createIpRestrictions(db, config.ipRestrictionCacheTtlMs);
    let dns: AuthoritativeDns | undefined;
    const sni =
      config.edgeHttpsPort === undefined
        ? undefined
        : createSniCertificates({ db, keyring, ttlMs: config.edgeCertCacheMs });
    const policies = createEndpointPolicies({ db, ttlMs: config.edgePolicyCacheMs });
    const onIssued = () => sni?.invalidate();
    const certs =
      config.certPollMs > 0
        ? createCertRunner({ db, config, keyring, logger, onIssued })
        : undefined;
    // A committed change may have changed zone data, certificates or queued a job: all see it.
    const onCommit = () => {
      dns?.invalidate();
      sni?.invalidate();
      policies.invalidate();
      void certs?.kick();
    };
    const { app, routes } = await buildApp({
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
    });
    const running = pipeline;
    agents = await startAgents(config, db, logger, running, sessions, {
      metrics,
      connectionLimits,
      ipAllowed: ipRestrictions.ipAllowed,
      endpointIp: (accountId, address) =>
        ipRestrictions.ipDecision(accountId, 'endpoints', address),
      sni,
      relayAuth,
      policies,
    });
    // Loaded only when configured, as the sinks' clients are: a start without DNS pays nothing.
    if (config.dnsPort !== undefined) {
      const { startAuthoritativeDns } = await import('./agent-plane/dns/index.ts');
      dns = await startAuthoritativeDns({ db, config, logger, connectionLimits });
    }
    const url = await app.listen({ host: config.host, port: config.port });
    certs?.start();
    const grpcApp =
      config.grpcPort === undefined
        ? undefined
        : await buildGrpcApp({ config, pipeline, metrics, logger, connectionLimits });
    const grpcUrl = await grpcApp?.listen({ host: config.host, port: config.grpcPort });
    let closing: Promise<void> | undefined;
    const { listener, edge, publisher, relay } = agents;
    return {
      app,
      db,
      pipeline: running,
      keyring,
      routes,
      url,
      grpcUrl,
      dns,
      certs,
      firstKey,
      sshPort: listener?.port,
      edgePort: edge?.port,
      edgeHttpsPort: edge?.httpsPort,
      sessions,
      close() {
        closing ??= (async () => {
          // The edge drains while the agents still answer; then sessions end (stop events).
          await Promise.all([
            edge?.close(config.shutdownTimeoutMs / 2),
            relay?.close(config.shutdownTimeoutMs / 2),
          ]);
          await listener?.close();
          sessions.close();
          // TCP connections cut with their sessions: their events too are durable before exit.
          await publisher.drain();
          await Promise.all([app.close(), grpcApp?.close()]);
          await certs?.close();
          await dns?.close();
          await running.close();
          await db.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    await agents?.relay?.close(0);
    registry?.close();
    await agents?.edge?.close(0);
    await agents?.listener?.close();
    await pipeline?.close();
    await db.close();
    throw error;
  }
}

/**
 * The agent face: the SSH listener (SSH_PORT) and the edge (EDGE_HTTP_PORT, EDGE_HTTPS_PORT),
 * each optional.
 */
async function startAgents(
  config: Config,
  db: Db,
  logger: Logger,
  pipeline: Pipeline,
  sessions: SessionRegistry,
  {
    metrics,
    connectionLimits,
    ipAllowed,
    endpointIp,
    sni,
    relayAuth,
    policies,
  }: {
    metrics: Metrics;
    connectionLimits: ConnectionLimits;
    ipAllowed: IpAllowed;
    endpointIp: DecideEndpointIp;
    sni: SniCertificates | undefined;
    relayAuth: RelayAuth;
    policies: EndpointPolicies;
  },
): Promise<{
  listener?: AgentListener;
  edge?: Edge;
  relay?: RelayListener;
  publisher: EdgePublisher;
}> {
  const kick = () => pipeline.relay.kick();
  const publisher = createEdgePublisher(pipeline, logger);
  const openTcp: AgentListenerDeps['openTcp'] = (session, address) =>
    openTcpEndpoint(session, address, {
      config,
      logger,
      publisher,
      endpointIp,
      limit: connectionLimits.listener('tcp'),
    });
  const listener =
    config.sshPort === undefined
      ? undefined
      : // ssh2 loads only when agents may connect (~100 ms of start-up).
        await (await import('./agent-plane/sessions/listener.ts')).startAgentListener({
          config,
          db,
          logger,
          registry: sessions,
          kick,
          ipAllowed,
          openTcp,
          metrics,
          connectionLimits,
        });
  try {
    const relayClient = createRelayClient({
      db,
      auth: relayAuth,
      logger,
      ownerId: sessions.owner.id,
    });
    const edge =
      config.edgeHttpPort === undefined && sni === undefined
        ? undefined
        : await startEdge({
            config,
            logger,
            registry: sessions,
            publisher,
            endpointIp,
            sni,
            relay: relayClient,
            connectionLimits,
            policies,
          });
    // Other instances relay to this one's sessions at INTERNAL_URL, served by its edge.
    const relay =
      edge === undefined || config.internalUrl === ''
        ? undefined
        : await startRelayListener({
            host: config.host,
            port: Number(new URL(config.internalUrl).port),
            auth: relayAuth,
            edge,
            registry: sessions,
            logger,
          }).catch(async (error: unknown) => {
            await edge.close(0);
            throw error;
          });
    // Holding INTERNAL_URL's port (or the embedded store) proves an earlier owner of it is gone.
    if (relay !== undefined || db.kind === 'pglite') {
      const dropped = await sessions.dropPredecessors();
      if (dropped > 0) logger.info({ sessions: dropped }, "a previous process's sessions dropped");
    }
    return { listener, edge, publisher, relay };
  } catch (error) {
    await listener?.close();
    throw error;
  }
}
