import type { FastifyInstance } from 'fastify';
import type { RouteTable } from './api/index.ts';
import { buildApp } from './app.ts';
import { bootstrapFirstKey } from './bootstrap.ts';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';
import type { Db } from './store/db.ts';
import { openStore } from './store/index.ts';

/** A running service: its HTTP server, where it listens, and how to stop it gracefully. */
export interface Service {
  app: FastifyInstance;
  db: Db;
  routes: RouteTable;
  url: string;
  /** The first API key, when this start created it (empty store). */
  firstKey: Awaited<ReturnType<typeof bootstrapFirstKey>>;
  close(): Promise<void>;
}

/** Opens the store, creates the first key on an empty store, and listens. */
export async function startService(config: Config, logger: Logger): Promise<Service> {
  const db = await openStore(config);
  try {
    const firstKey = await bootstrapFirstKey(db, config);
    const { app, routes } = await buildApp({ config, db, logger });
    const url = await app.listen({ host: config.host, port: config.port });
    let closing: Promise<void> | undefined;
    return {
      app,
      db,
      routes,
      url,
      firstKey,
      close() {
        closing ??= (async () => {
          await app.close();
          await db.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    await db.close();
    throw error;
  }
}
