/**
 * Whether `address` may reach `accountId` as an agent (`agent`) or as a client of its endpoints
 * (`endpoints`), by the account's enforced IP restrictions. The IP restrictions module provides
 * it; the agent listener and the edge each call it at one place (listener.ts authentication,
 * edge-server.ts request). Absent, nothing is restricted and the edge reports `invalid`.
 */
export type IpAllowed = (
  accountId: string,
  type: 'agent' | 'endpoints',
  address: string,
) => Promise<boolean>;
