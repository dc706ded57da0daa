import type { IpDecision } from '../../shared/net/restriction-cache.ts';

/**
 * Whether `address` may reach `accountId` as an agent (`agent`) or as a client of its endpoints
 * (`endpoints`), by the account's enforced IP restrictions. The IP restrictions module provides
 * it; the agent listener calls it at one place (listener.ts authentication).
 */
export type IpAllowed = (
  accountId: string,
  type: 'agent' | 'endpoints',
  address: string,
) => Promise<boolean>;

/**
 * The decision for a client of the account's endpoints; the edge calls it once per request
 * (edge-server.ts) and once per TCP connection (tcp-endpoint.ts).
 */
export type DecideEndpointIp = (accountId: string, address: string) => Promise<IpDecision>;
