import { AppError } from '../../../shared/errors.ts';
import { choosePort } from '../../../shared/net/port-choice.ts';
import { lockAddrAllocation } from '../../../store/advisory-locks.ts';
import { heldPorts, takenPorts } from '../../../store/reserved-addrs.ts';
import type { Family } from '../objects/family.ts';
import { RESERVED_ADDRS } from './resource.ts';

/** The region asked for, or `us` (the spec's default; the first region if `us` is not served). */
function readRegion(given: unknown, regions: readonly string[]): string {
  if (given === undefined) return regions.includes('us') ? 'us' : regions[0];
  if (!regions.includes(given as string)) {
    throw new AppError('ERR_INVALID_FIELD', `"region" must be one of ${regions.join(', ')}`, {
      field: 'region',
    });
  }
  return given as string;
}

/**
 * Reserved TCP addresses: `<region>.tcp.<service domain>:<port>`, the port a random free one of
 * TCP_ADDR_PORTS, unique across the service and not held by a session (an ngrok agent's TCP
 * endpoint without an address holds one while it lives). Allocation holds an advisory lock until the
 * transaction ends, so concurrent creates (on any instance) never pick the same port.
 */
export const RESERVED_ADDRS_FAMILY: Family = {
  resource: RESERVED_ADDRS,
  async create(body, ctx) {
    const region = readRegion(body.region, ctx.config.regions);
    const host = `${region}.tcp.${ctx.config.serviceDomain}`;
    await lockAddrAllocation(ctx.tx);
    const taken = [...(await takenPorts(ctx.tx, host)), ...(await heldPorts(ctx.tx, host))];
    const port = choosePort(ctx.config.tcpAddrPorts, taken, Math.random());
    if (port === undefined) {
      const { first, last } = ctx.config.tcpAddrPorts;
      throw new AppError(
        'ERR_NO_FREE_PORT',
        `every port of ${first}-${last} is reserved or held by a session in region ${region}; delete an address or reserve one in another region`,
        { region },
      );
    }
    const addr = `${host}:${port}`;
    return {
      fields: { addr, region },
      unique: { key: addr, scope: 'service', field: 'addr' },
    };
  },
};
