import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy } from '../resources.ts';

/** IP policies: named groups of allow/deny rules that IP restrictions apply. */
export const IP_POLICIES: Resource = {
  path: 'ip_policies',
  title: 'IP policy',
  idPrefix: 'ipp',
  listKey: 'ip_policies',
  audit: 'ip_policy',
  example: ({ tag }) => ({ description: tag }),
  fields: { ...COMMON, ...describedBy('maxBytes') },
};
