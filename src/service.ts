import type { FastifyInstance } from 'fastify';
import type { RouteTable } from './api/index.ts';
import { buildApp, buildGrpcApp } from './app.ts';
import { bootstrapFirstKey } from './bootstrap.ts';
import { type CertRunner, createCertRunner } from './certs/runner.ts';
import type { Config } from './config.ts';
import { prepareDataDir } from './data-dir.ts';
import type { AuthoritativeDns } from './dns/index.ts';
import type { Logger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { createPipeline, type Pipeline } from './pipeline/pipeline.ts';
import { type Keyring, loadKeyring } from './secrets.ts';
import { migrateFileLayout } from './sinks/file/layout.ts';
import { resealObjectSecrets } from './store/account-objects.ts';
import type { Db } from './store/db.ts';
import { fileDestinationPaths, resealDestinationSecrets } from './store/event-destinations.ts';
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
  try {
    const resealed = await resealDestinationSecrets(db, keyring);
    const resealedObjects = await resealObjectSecrets(db, keyring);
    if (resealed + resealedObjects > 0) {
      logger.info({ destinations: resealed, objects: resealedObjects }, 'secrets re-encrypted');
    }
    await migrateFileLayout(config.dataDir, () => fileDestinationPaths(db), logger);
    const firstKey = await bootstrapFirstKey(db, config);
    const metrics = createMetrics();
    pipeline = await createPipeline({ db, config, logger, metrics, keyring });
    let dns: AuthoritativeDns | undefined;
    const certs =
      config.certPollMs > 0 ? createCertRunner({ db, config, keyring, logger }) : undefined;
    // A committed change may have changed zone data or queued a job: both see it at once.
    const onCommit = () => {
      dns?.invalidate();
      void certs?.kick();
    };
    const { app, routes } = await buildApp({
      config,
      db,
      logger,
      pipeline,
      metrics,
      keyring,
      onCommit,
    });
    // Loaded only when configured, as the sinks' clients are: a start without DNS pays nothing.
    if (config.dnsPort !== undefined) {
      const { startAuthoritativeDns } = await import('./dns/index.ts');
      dns = await startAuthoritativeDns({ db, config, logger });
    }
    const url = await app.listen({ host: config.host, port: config.port });
    certs?.start();
    const grpcApp =
      config.grpcPort === undefined
        ? undefined
        : await buildGrpcApp({ config, pipeline, metrics, logger });
    const grpcUrl = await grpcApp?.listen({ host: config.host, port: config.grpcPort });
    let closing: Promise<void> | undefined;
    const running = pipeline;
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
      close() {
        closing ??= (async () => {
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
    await pipeline?.close();
    await db.close();
    throw error;
  }
}
