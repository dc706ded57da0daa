import type { LiveSession } from './live-session.ts';

// Internal endpoints (`<name>.internal`, docs/traffic-policy.md#internal-endpoints): bound like
// any hostname (`ssh -R <name>.internal:80:…`, an ngrok agent's Bind) but each account's own, so
// two accounts may both bind `api.internal`. The registry keys them by account; the edge never
// routes a Host to one, only a cloud endpoint's forward-internal of the same account does.

/** The suffix of every internal endpoint's hostname. */
const INTERNAL_SUFFIX = '.internal';

/** Whether `hostname` names an internal endpoint. */
export function isInternalHostname(hostname: string): boolean {
  return hostname.endsWith(INTERNAL_SUFFIX);
}

/**
 * The registry's key of an endpoint: the hostname itself, or for an internal one the account and
 * the hostname (`acc_…/api.internal`: a '/' no Host can carry, and still ending in .internal).
 */
export function endpointKey(accountId: string, hostname: string): string {
  return isInternalHostname(hostname) ? `${accountId}/${hostname}` : hostname;
}

/** The registry's key of a session's endpoint. */
export function sessionKey(session: LiveSession): string {
  return endpointKey(session.facts.credential.accountId, session.hostname);
}

/** The endpoint's name of a registry key (endpointKey's inverse): the hostname or address. */
export function endpointNameOf(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}
