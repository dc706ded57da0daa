import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../../shared/errors.ts';
import { loadAccountRestrictions } from '../../../shared/net/account-restrictions.ts';
import { formatAddress, parseCallerAddress } from '../../../shared/net/cidr.ts';
import { decide } from '../../../shared/net/ip-decision.ts';
import type { RestrictionCache } from '../../../shared/net/restriction-cache.ts';
import { lockAccountIpChanges } from '../../../store/advisory-locks.ts';
import type { FamilyContext } from '../objects/family.ts';

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

/** Paths whose changes alter IP restrictions: the account's cache entry is dropped after one. */
const RESTRICTION_PATHS = ['/ip_policies', '/ip_policy_rules', '/ip_restrictions'];

/**
 * An onSend hook: once a change to the caller's policies, rules or restrictions has committed
 * (the answer is about to leave), this instance forgets the account's cached restrictions, so the
 * client's next request meets the new ones.
 */
export function createRestrictionInvalidation(restrictions: RestrictionCache) {
  return async function forgetChangedRestrictions(
    request: FastifyRequest,
    _reply: FastifyReply,
    payload: unknown,
  ): Promise<unknown> {
    const url = request.routeOptions.url ?? '';
    if (request.method !== 'GET' && request.caller !== undefined) {
      if (RESTRICTION_PATHS.some((path) => url.startsWith(path))) {
        restrictions.invalidate(request.caller.accountId);
      }
    }
    return payload;
  };
}

/**
 * Refuses (409 ERR_IP_RESTRICTION_LOCKOUT) a change after which an enforced `api` restriction
 * would refuse the caller's own address: run in the change's transaction once it is written, or
 * before a delete with `without` naming what goes. Concurrent checks of an account wait for each
 * other, so two changes that are each harmless cannot lock the caller out together.
 */
export async function refuseLockout(ctx: FamilyContext, without?: string): Promise<void> {
  await lockAccountIpChanges(ctx.tx, ctx.accountId);
  const api = (await loadAccountRestrictions(ctx.tx, ctx.accountId, without)).get('api') ?? [];
  const verdict = decide(api, parseCallerAddress(ctx.clientIp));
  if (verdict.allowed) return;
  const clientIp = shownAddress(ctx.clientIp);
  throw new AppError(
    'ERR_IP_RESTRICTION_LOCKOUT',
    `refused: after this change IP restriction ${verdict.refusedBy} would refuse API requests from your own address ${clientIp}; allow ${clientIp} in one of its policies first, or set its "enforced" to false`,
    { client_ip: clientIp, ip_restriction_id: verdict.refusedBy },
  );
}
