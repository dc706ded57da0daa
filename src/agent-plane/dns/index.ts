import type { Packet } from 'dns-packet';
import type { Config } from '../../config/load.ts';
import type { ConnectionLimits } from '../../shared/http/connection-limits.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Db } from '../../store/db.ts';
import { answerQuery, serverFailure } from './answer.ts';
import { type DnsServer, startDnsServer } from './server.ts';
import { createZoneCache, loadZoneData, zoneOf } from './zones.ts';

/** Least time between two store reads caused by names outside the cached zones, ms. */
const REREAD_MS = 1_000;

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
  connectionLimits: ConnectionLimits;
}): Promise<AuthoritativeDns> {
  const { db, config, logger } = deps;
  const cache = createZoneCache(() => loadZoneData(db, config), config.dnsCacheMs);
  /**
   * The zone data for a name. A name outside every cached zone may be in one another instance
   * just created (an ACME server asking for its challenge): then the store is read again, at
   * most once per REREAD_MS, before the name is refused.
   */
  async function zonesFor(name: string | undefined) {
    const zones = await cache.get();
    if (name === undefined || zoneOf(zones, name.toLowerCase()) !== undefined) return zones;
    if (cache.age() < REREAD_MS) return zones;
    cache.invalidate();
    return cache.get();
  }

  async function answer(query: Packet): Promise<Packet> {
    try {
      return await answerQuery(query, {
        zones: await zonesFor(query.questions?.[0]?.name),
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
    tcp: {
      limit: deps.connectionLimits.listener('dns_tcp'),
      idleTimeoutMs: config.dnsTcpIdleTimeoutMs,
      timeoutMs: config.dnsTcpTimeoutMs,
    },
  });
  return { ...server, invalidate: cache.invalidate };
}
