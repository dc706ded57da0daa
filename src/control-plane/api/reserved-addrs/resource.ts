import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, str } from '../resources.ts';

/** Reserved TCP addresses: a `hostname:port` of a region, the account's alone. */
export const RESERVED_ADDRS: Resource = {
  path: 'reserved_addrs',
  title: 'reserved address',
  idPrefix: 'ra',
  listKey: 'reserved_addrs',
  audit: 'tcp_address',
  example: ({ tag }) => ({ description: tag }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    addr: {
      schema: str,
      serverAssigned: true,
      doc: '<region>.tcp.<service domain>:<port>, assigned at creation from TCP_ADDR_PORTS',
    },
    region: {
      schema: str,
      notUpdatable: 'reserve an address in the other region and delete this one',
      doc: 'one of the configured REGIONS; default us',
    },
  },
};
