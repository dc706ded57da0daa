import type { FastifyInstance } from 'fastify';
import type { AuthoritativeDns } from './agent-plane/dns/index.ts';
import { type Edge, startEdge } from './agent-plane/edge/edge-server.ts';
import { createEdgePublisher, type EdgePublisher } from './agent-plane/edge/publisher.ts';
import { createRelayAuth, type RelayAuth } from './agent-plane/edge/relay-auth.ts';
import { createRelayClient, relayStop } from './agent-plane/edge/relay-client.ts';
import { relayCommand } from './agent-plane/edge/relay-command.ts';
import { type RelayListener, startRelayListener } from './agent-plane/edge/relay-listener.ts';
import {
  createSniCertificates,
  type SniCertificates,
} from './agent-plane/edge/sni-certificates.ts';
import { openTcpEndpoint } from './agent-plane/edge/tcp-endpoint.ts';
import { agentCertificates } from './agent-plane/ngrok/agent-tls.ts';
import { type NgrokListener, startNgrokListener } from './agent-plane/ngrok/listener.ts';
import { createEndpointPolicies, type EndpointPolicies } from './agent-plane/policy/index.ts';
import type { OpenTcp } from './agent-plane/sessions/agent-face.ts';
import type { DecideEndpointIp, IpAllowed } from './agent-plane/sessions/ip-allowed.ts';
import type { AgentListener } from './agent-plane/sessions/listener.ts';
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
import type { EarlyListener } from './shared/net/early-listener.ts';
import { type Keyring, loadKeyring } from './shared/secrets.ts';
import { resealObjectSecrets, sealEndpointPolicies } from './store/account-objects.ts';
import type { Db } from './store/db.ts';
import { openStore, storeOpening } from './store/index.ts';

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
  /** The SSH host key's fingerprint (`SHA256:…`), when the agent listener runs. */
  sshHostKeyFingerprint: string | undefined;
  /** Where ngrok's agents and SDKs connect over TLS (AGENT_PORT), when that listener runs. */
  agentPort: number | undefined;
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

/**
 * The agents' ports as main.ts bound them when the process began, so agents reconnecting during
 * the start wait for it (shared/net/early-listener.ts); an absent one is bound by its listener.
 */
export interface AgentPorts {
  ssh?: EarlyListener;
  ngrok?: EarlyListener;
}

/** A step of the start, said to the person watching it (main.ts: on stderr). */
export type StartProgress = (step: string) => void;

/**
 * Opens the store, creates the first key on an empty store, starts the pipeline, and listens,
 * telling `progress` each slow step before it begins.
 */
export async function startService(
  config: Config,
  logger: Logger,
  progress: StartProgress = () => {},
  agentPorts: AgentPorts = {},
): Promise<Service> {
  // A failed start closes the agents' ports too, whether a listener took them over or not.
  return startOnStore({ config, logger, progress, agentPorts }).catch((error: unknown) => {
    agentPorts.ssh?.close();
    agentPorts.ngrok?.close();
    throw error;
  });
}

async function startOnStore(given: Omit<Started, 'keyring' | 'db'>): Promise<Service> {
  const { config, logger, progress } = given;
  await prepareDataDir(config.dataDir, logger);
  const keyring = await loadKeyring(config);
  progress(storeOpening(config));
  const db = await openStore(config);
  const started: Started = { ...given, keyring, db };
  try {
    return await startPlanes(started);
  } catch (error) {
    await abandon(started);
    throw error;
  }
}

type Agents = Awaited<ReturnType<typeof startAgents>>;

/** What the start has made so far: what a failed start stops, and what a commit tells. */
interface Started {
  config: Config;
  logger: Logger;
  keyring: Keyring;
  db: Db;
  progress: StartProgress;
  agentPorts: AgentPorts;
  pipeline?: Pipeline;
  registry?: SessionRegistry;
  agents?: Agents;
  sni?: SniCertificates;
  policies?: EndpointPolicies;
  certs?: CertRunner;
  dns?: AuthoritativeDns;
}

/** What close() stops (in its own order: the edge first, the store last). */
interface Running {
  config: Config;
  app: FastifyInstance;
  grpcApp: FastifyInstance | undefined;
  db: Db;
  pipeline: Pipeline;
  sessions: SessionRegistry;
  agents: Agents;
  certs: CertRunner | undefined;
  dns: AuthoritativeDns | undefined;
}

/** The store brought up to date, the planes started over it, the listeners open. */
async function startPlanes(started: Started): Promise<Service> {
  const { config, logger, keyring, db } = started;
  const firstKey = await upgradeStore(started);
  const { metrics, connectionLimits } = metricsAndLimits(started);
  started.progress(`Starting the pipeline (${config.workerThreads} worker threads)…`);
  const pipeline = await createPipeline({ db, config, logger, metrics, keyring });
  started.pipeline = pipeline;
  const relayAuth = createRelayAuth(keyring);
  const sessions = createSessionRegistry({
    db,
    logger,
    maxPerAccount: config.maxSessionsPerAccount,
    leaseMs: config.sessionLeaseMs,
    internalUrl: config.internalUrl,
    stopElsewhere: (owner, id, principal) => relayStop(relayAuth, owner, id, principal),
    commandElsewhere: (owner, id, accountId, command) =>
      relayCommand(relayAuth, owner, id, accountId, command),
  });
  started.registry = sessions;
  // One cache of IP restrictions: a change through the API applies at once to agents and edge.
  const ipRestrictions = createIpRestrictions(db, config.ipRestrictionCacheTtlMs);
  const { sni, certs } = certificates(started);
  const policies = createEndpointPolicies({ db, ttlMs: config.edgePolicyCacheMs, keyring });
  started.policies = policies;
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
    onCommit: () => committed(started),
  });
  const agents = await startAgents(config, db, logger, pipeline, sessions, {
    agentPorts: started.agentPorts,
    metrics,
    connectionLimits,
    ipAllowed: ipRestrictions.ipAllowed,
    endpointIp: (accountId, address) => ipRestrictions.ipDecision(accountId, 'endpoints', address),
    sni,
    keyring,
    relayAuth,
    policies,
  });
  started.agents = agents;
  // Loaded only when configured, as the sinks' clients are: a start without DNS pays nothing.
  if (config.dnsPort !== undefined) {
    const { startAuthoritativeDns } = await import('./agent-plane/dns/index.ts');
    started.dns = await startAuthoritativeDns({ db, config, logger, connectionLimits });
  }
  const url = await app.listen({ host: config.host, port: config.port });
  certs?.start();
  const grpcApp =
    config.grpcPort === undefined
      ? undefined
      : await buildGrpcApp({ config, pipeline, metrics, logger, connectionLimits });
  const grpcUrl = await grpcApp?.listen({ host: config.host, port: config.grpcPort });
  const running = { config, app, grpcApp, db, pipeline, sessions, agents, certs, dns: started.dns };
  return serviceOf(running, { keyring, routes, url, grpcUrl, firstKey });
}

/** Secrets sealed anew under the current key, file destinations in today's layout, the first key. */
async function upgradeStore({ config, logger, keyring, db }: Started) {
  const resealed = await resealDestinationSecrets(db, keyring);
  const policies = await sealEndpointPolicies(db, keyring);
  const resealedObjects = await resealObjectSecrets(db, keyring);
  if (resealed + resealedObjects + policies > 0) {
    const counts = {
      destinations: resealed,
      objects: resealedObjects,
      endpoint_policies: policies,
    };
    logger.info(counts, 'secrets re-encrypted');
  }
  await migrateFileLayout(config.dataDir, () => fileDestinationPaths(db), logger);
  return bootstrapFirstKey(db, config);
}

/** The process's metrics, and its connection limits (MAX_CONNECTIONS within the open-file limit). */
function metricsAndLimits({ config, logger, db }: Started) {
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
  return { metrics, connectionLimits };
}

/**
 * Certificates by SNI (the edge's HTTPS listener and the ngrok agent listener choose them the same
 * way) and the certificate jobs (CERT_POLL_MS > 0).
 */
function certificates(started: Started) {
  const { config, logger, keyring, db } = started;
  const sni =
    config.edgeHttpsPort === undefined && config.agentPort === undefined
      ? undefined
      : createSniCertificates({ db, keyring, ttlMs: config.edgeCertCacheMs });
  const onIssued = () => sni?.invalidate();
  const certs =
    config.certPollMs > 0 ? createCertRunner({ db, config, keyring, logger, onIssued }) : undefined;
  started.sni = sni;
  started.certs = certs;
  return { sni, certs };
}

// A committed change may have changed zone data, certificates or queued a job: all see it.
function committed({ dns, sni, policies, certs }: Started): void {
  dns?.invalidate();
  sni?.invalidate();
  policies?.invalidate();
  void certs?.kick();
}

function serviceOf(
  running: Running,
  about: Pick<Service, 'keyring' | 'routes' | 'url' | 'grpcUrl' | 'firstKey'>,
): Service {
  const { app, db, pipeline, sessions, dns, certs, agents } = running;
  let closing: Promise<void> | undefined;
  return {
    app,
    db,
    pipeline,
    ...about,
    dns,
    certs,
    sshPort: agents.listener?.port,
    sshHostKeyFingerprint: agents.listener?.hostKeyFingerprint,
    agentPort: agents.ngrok?.port,
    edgePort: agents.edge?.port,
    edgeHttpsPort: agents.edge?.httpsPort,
    sessions,
    close() {
      closing ??= closeRunning(running);
      return closing;
    },
  };
}

async function closeRunning(running: Running): Promise<void> {
  const { config, app, grpcApp, db, pipeline, sessions, certs, dns } = running;
  const { listener, ngrok, edge, publisher, relay } = running.agents;
  // The edge drains while the agents still answer; then sessions end (stop events).
  await Promise.all([
    edge?.close(config.shutdownTimeoutMs / 2),
    relay?.close(config.shutdownTimeoutMs / 2),
  ]);
  await Promise.all([listener?.close(), ngrok?.close()]);
  sessions.close();
  // TCP connections cut with their sessions: their events too are durable before exit.
  await publisher.drain();
  await Promise.all([app.close(), grpcApp?.close()]);
  await certs?.close();
  await dns?.close();
  await pipeline.close();
  await db.close();
}

/** Stops what a failed start had started, the store last. */
async function abandon({ agents, registry, pipeline, db }: Started): Promise<void> {
  await agents?.relay?.close(0);
  registry?.close();
  await agents?.edge?.close(0);
  await agents?.listener?.close();
  await agents?.ngrok?.close();
  await pipeline?.close();
  await db.close();
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
    agentPorts,
    metrics,
    connectionLimits,
    ipAllowed,
    endpointIp,
    sni,
    keyring,
    relayAuth,
    policies,
  }: {
    agentPorts: AgentPorts;
    metrics: Metrics;
    connectionLimits: ConnectionLimits;
    ipAllowed: IpAllowed;
    endpointIp: DecideEndpointIp;
    sni: SniCertificates | undefined;
    keyring: Keyring;
    relayAuth: RelayAuth;
    policies: EndpointPolicies;
  },
): Promise<{
  listener?: AgentListener;
  ngrok?: NgrokListener;
  edge?: Edge;
  relay?: RelayListener;
  publisher: EdgePublisher;
}> {
  const kick = () => pipeline.relay.kick();
  const publisher = createEdgePublisher(pipeline, logger);
  const openTcp: OpenTcp = (session, address) =>
    openTcpEndpoint(session, address, {
      config,
      logger,
      publisher,
      endpointIp,
      policies,
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
          early: agentPorts.ssh,
        });
  let ngrok: NgrokListener | undefined;
  try {
    ngrok =
      config.agentPort === undefined || sni === undefined
        ? undefined
        : await startNgrokListener({
            config,
            db,
            logger,
            registry: sessions,
            certificates: await agentCertificates({
              sni,
              db,
              keyring,
              serviceDomain: config.serviceDomain,
              certFile: config.agentTlsCertFile,
              keyFile: config.agentTlsKeyFile,
              dataDir: config.dataDir,
              logger,
            }),
            kick,
            ipAllowed,
            openTcp,
            connectionLimits,
            early: agentPorts.ngrok,
          });
    const relayClient = createRelayClient({
      db,
      auth: relayAuth,
      logger,
      ownerId: sessions.owner.id,
    });
    const edge =
      config.edgeHttpPort === undefined && config.edgeHttpsPort === undefined
        ? undefined
        : await startEdge({
            config,
            logger,
            registry: sessions,
            publisher,
            endpointIp,
            sni: config.edgeHttpsPort === undefined ? undefined : sni,
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
    return { listener, ngrok, edge, publisher, relay };
  } catch (error) {
    await listener?.close();
    await ngrok?.close();
    throw error;
  }
}
