import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.ts';
import { formatAddress, parseCallerAddress } from '../net/cidr.ts';
import type { RestrictionCache } from '../net/restriction-cache.ts';

// The account's `api` IP restrictions, applied to every REST request once the API key has named
// the account. The address is the TCP peer's (request.ip without trustProxy): like ngrok, headers
// such as X-Forwarded-For are never believed, since any client can write them.

/** The caller's address as messages show it (IPv4-mapped IPv6 written as IPv4). */
export function shownAddress(ip: string): string {
  const address = parseCallerAddress(ip);
  return address ? formatAddress(address) : ip;
}

/**
 * An onRequest hook, after authentication and before the rate limit (a refused caller spends no
 * budget of the key's legitimate users): 403 ERR_IP_RESTRICTED when an enforced `api`
 * restriction refuses the caller; a restriction not enforced logs a warning and lets it through.
 */
export function createIpRestrictionHook(restrictions: RestrictionCache) {
  return async function enforceIpRestrictions(request: FastifyRequest): Promise<void> {
    const { accountId } = request.caller;
    const verdict = await restrictions.verdict(accountId, 'api', request.ip);
    if (verdict.allowed && verdict.warnings.length === 0) return;
    const clientIp = shownAddress(request.ip);
    for (const restriction of verdict.warnings) {
      request.log.warn(
        { ip_restriction_id: restriction, client_ip: clientIp, account_id: accountId },
        'IP restriction (not enforced) would refuse this API request',
      );
    }
    if (verdict.allowed) return;
    throw new AppError(
      'ERR_IP_RESTRICTED',
      `the API refuses requests from ${clientIp}: IP restriction ${verdict.refusedBy} of this account does not allow it`,
      { client_ip: clientIp, ip_restriction_id: verdict.refusedBy },
    );
  };
}
