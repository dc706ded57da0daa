import type { JsonWebKey } from 'node:crypto';
import type { PolicyServices } from '../exchange.ts';

// The identity providers' JSON documents the login and JWT actions read (OpenID discovery,
// JWKS): fetched through the policy services, kept per URL in the process's policy state
// for TTL_MS (ngrok refreshes JWKS "roughly every 15 minutes"), at most MAX_DOCUMENTS of them.
// A key id no cached set holds fetches the set again, at most once per MIN_REFETCH_MS, so a
// provider's key rotation is seen without letting unknown `kid`s hammer it.

const TTL_MS = 15 * 60_000;
const MIN_REFETCH_MS = 30_000;
const MAX_DOCUMENTS = 256;
const STATE_KEY = 'identity:documents';

interface Entry {
  at: number;
  value: Promise<unknown>;
}

function documents(services: PolicyServices): Map<string, Entry> {
  let map = services.state.get(STATE_KEY) as Map<string, Entry> | undefined;
  if (map === undefined) {
    map = new Map();
    services.state.set(STATE_KEY, map);
  }
  return map;
}

/** The JSON at `url`, cached; `stale: true` asks for a fresh copy unless one is very recent. */
export function jsonDocument(
  services: PolicyServices,
  url: string,
  stale = false,
): Promise<unknown> {
  const map = documents(services);
  const now = services.now();
  let entry = map.get(url);
  const age = entry === undefined ? Infinity : now - entry.at;
  if (age > TTL_MS || (stale && age > MIN_REFETCH_MS)) {
    entry = { at: now, value: services.fetchJson(url) };
    const failed = entry;
    entry.value.catch(() => {
      if (map.get(url) === failed) map.delete(url);
    });
    if (map.size >= MAX_DOCUMENTS) map.clear();
    map.set(url, entry);
  }
  return entry!.value;
}

function keysOf(document: unknown): JsonWebKey[] {
  const keys = (document as { keys?: unknown } | null)?.keys;
  return Array.isArray(keys) ? keys.filter((k) => typeof k === 'object' && k !== null) : [];
}

/** The keys of the JWKS at `url` that may have signed a token with `kid` and `alg`. */
export async function signingKeys(
  services: PolicyServices,
  url: string,
  kid: string | undefined,
  alg: string,
): Promise<JsonWebKey[]> {
  const fitting = (keys: JsonWebKey[]) =>
    keys.filter(
      (k) =>
        (kid === undefined || k.kid === kid) &&
        (k.use === undefined || k.use === 'sig') &&
        (k.alg === undefined || k.alg === alg),
    );
  const found = fitting(keysOf(await jsonDocument(services, url)));
  if (found.length > 0 || kid === undefined) return found;
  return fitting(keysOf(await jsonDocument(services, url, true)));
}

/** What OpenID discovery says of an issuer (the fields the login flow uses). */
export interface ProviderMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  userinfo_endpoint?: string;
  jwks_uri?: string;
  token_endpoint_auth_methods_supported?: string[];
  code_challenge_methods_supported?: string[];
}

/** The issuer's `/.well-known/openid-configuration`, checked (OpenID Discovery 1.0 §4.3). */
export async function discover(
  services: PolicyServices,
  issuerUrl: string,
): Promise<ProviderMetadata> {
  const url = `${issuerUrl.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const meta = (await jsonDocument(services, url)) as Partial<ProviderMetadata> | null;
  if (meta?.issuer !== issuerUrl) {
    throw new Error(`${url} names issuer ${String(meta?.issuer)}, not ${issuerUrl}`);
  }
  for (const field of ['authorization_endpoint', 'token_endpoint'] as const) {
    if (typeof meta[field] !== 'string') throw new Error(`${url} has no ${field}`);
  }
  return meta as ProviderMetadata;
}
