import type { Packet } from 'dns-packet';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import { answerQuery, serverFailure } from './answer.ts';
import { type DnsServer, startDnsServer } from './server.ts';
import { createZoneCache, loadZoneData } from './zones.ts';

/** The authoritative DNS of the service: its server, and a way to make changes visible at once. */
export interface AuthoritativeDns extends DnsServer {
  /** Drops the cached zone data (after a change in this instance). */
  invalidate(): void;
}

/** The TXT values of pending DNS-01 challenges at a name. */
async function pendingChallenges(db: Db, name: string): Promise<string[]> {
  const result = await db.query<{ value: string }>(
    'SELECT value FROM acme_challenges WHERE name = $1 ORDER BY value',
    [name],
  );
  return result.rows.map((row) => row.value);
}

/** Serves the store's zones on DNS_PORT (UDP and TCP). */
export async function startAuthoritativeDns(deps: {
  db: Db;
  config: Config;
  logger: Logger;
}): Promise<AuthoritativeDns> {
  const { db, config, logger } = deps;
  const cache = createZoneCache(() => loadZoneData(db, config), config.dnsCacheMs);
  async function answer(query: Packet): Promise<Packet> {
    try {
      return await answerQuery(query, {
        zones: await cache.get(),
        nameServers: config.nameServers,
        challenges: (name) => pendingChallenges(db, name),
      });
    } catch (error) {
      logger.error({ err: error }, 'dns: the store did not answer');
      return serverFailure(query);
    }
  }
  const server = await startDnsServer({
    host: config.host,
    port: config.dnsPort ?? 0,
    answer,
    logger,
  });
  return { ...server, invalidate: cache.invalidate };
}
