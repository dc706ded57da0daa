import type { Config } from '../../config/load.ts';
import { inertClaims } from '../../shared/domains/claims.ts';
import type { Queryable } from '../../store/db.ts';
import { allClaims } from '../../store/domain-claims.ts';

/**
 * What the authoritative DNS serves, read from the store: the zones (apexes) it answers for,
 * the addresses of exact names, and those of every name under a wildcard's parent.
 */
export interface ZoneData {
  zones: Set<string>;
  hosts: Map<string, string[]>;
  wildcards: Map<string, string[]>;
}

type ZoneConfig = Pick<Config, 'regions' | 'edgeAddresses' | 'serviceDomain'>;

/** The edge addresses of a region (`*` when the region is not listed). */
export function regionAddresses(config: ZoneConfig, region: string): string[] {
  return config.edgeAddresses[region] ?? config.edgeAddresses['*'] ?? [];
}

/** The addresses of every configured region, each once. */
function allAddresses(config: ZoneConfig): string[] {
  return [...new Set(config.regions.flatMap((region) => regionAddresses(config, region)))];
}

function isUnder(name: string, zone: string): boolean {
  return name === zone || name.endsWith(`.${zone}`);
}

/** Builds the zone data: ingress domains with their region domains, reserved domains, targets. */
export function buildZoneData(
  config: ZoneConfig,
  ingressDomains: string[],
  reserved: { domain: string; region: string | null; cname_target: string | null }[],
): ZoneData {
  const data: ZoneData = {
    zones: new Set([config.serviceDomain]),
    hosts: new Map(),
    wildcards: new Map(),
  };
  for (const domain of ingressDomains) {
    data.zones.add(domain);
    for (const region of config.regions) {
      data.hosts.set(`${region}.${domain}`, regionAddresses(config, region));
      data.wildcards.set(`${region}.${domain}`, regionAddresses(config, region));
    }
  }
  for (const row of reserved) {
    const addresses = row.region ? regionAddresses(config, row.region) : allAddresses(config);
    const wildcard = row.domain.startsWith('*.');
    const base = wildcard ? row.domain.slice(2) : row.domain;
    // A custom domain is answered here once its owner delegates it (or CNAMEs to the target).
    if (!isUnder(base, config.serviceDomain)) data.zones.add(base);
    if (wildcard) data.wildcards.set(base, addresses);
    else data.hosts.set(base, addresses);
    if (row.cname_target !== null) data.hosts.set(row.cname_target, addresses);
  }
  return data;
}

/**
 * Reads the zone data from the store: the live claims only (src/shared/domains/claims.ts), so no zone
 * or name of one account is ever served inside another account's.
 */
export async function loadZoneData(db: Queryable, config: ZoneConfig): Promise<ZoneData> {
  const inert = inertClaims(await allClaims(db));
  const ingresses = await db.query<{ id: string; domain: string }>(
    'SELECT id, domain FROM agent_ingresses',
  );
  const reserved = await db.query<{
    id: string;
    domain: string;
    region: string | null;
    cname_target: string | null;
  }>(
    `SELECT id, fields->>'domain' AS domain, fields->>'region' AS region,
            fields->>'cname_target' AS cname_target
     FROM account_objects WHERE kind = 'reserved_domains'`,
  );
  const live = <T extends { id: string }>(rows: T[]) => rows.filter((row) => !inert.has(row.id));
  return buildZoneData(
    config,
    live(ingresses.rows).map((row) => row.domain),
    live(reserved.rows),
  );
}

/** The served zone a name falls in (the longest matching apex), if any. */
export function zoneOf(data: ZoneData, name: string): string | undefined {
  let best: string | undefined;
  for (const zone of data.zones) {
    if (isUnder(name, zone) && (best === undefined || zone.length > best.length)) best = zone;
  }
  return best;
}

/** The addresses a name has: its own, else those of the closest wildcard above it in its zone. */
export function addressesOf(data: ZoneData, name: string, zone: string): string[] | undefined {
  const own = data.hosts.get(name);
  if (own !== undefined) return own;
  for (let parent = name; parent !== zone && parent.includes('.'); ) {
    parent = parent.slice(parent.indexOf('.') + 1);
    const wildcard = data.wildcards.get(parent);
    if (wildcard !== undefined) return wildcard;
  }
  return undefined;
}

/**
 * Zone data read from the store at most every `ttlMs`; `invalidate()` makes the next read fresh
 * (this instance's own changes are visible at once, other instances' within ttlMs).
 */
export function createZoneCache(load: () => Promise<ZoneData>, ttlMs: number, now = Date.now) {
  let cached: { data: Promise<ZoneData>; at: number } | undefined;
  return {
    get(): Promise<ZoneData> {
      if (cached === undefined || now() - cached.at >= ttlMs) {
        const data = load();
        cached = { data, at: now() };
        // A failed read is not kept: the next question reads again.
        data.catch(() => {
          if (cached?.data === data) cached = undefined;
        });
      }
      return cached.data;
    },
    invalidate(): void {
      cached = undefined;
    },
    /** How old the cached data is, ms (Infinity when nothing is cached). */
    age(): number {
      return cached === undefined ? Number.POSITIVE_INFINITY : now() - cached.at;
    },
  };
}

/** The zone cache's interface. */
export type ZoneCache = ReturnType<typeof createZoneCache>;
