import { FAMILIES } from './objects/families.ts';
import type { Resource } from './resource-types.ts';
import { AGENT_INGRESSES, API_KEYS, EVENT_DESTINATIONS, EVENT_SUBSCRIPTIONS } from './resources.ts';

/**
 * Every resource, in the order the API registers them: the OpenAPI document, the CLI and the
 * isolation sweep loop over it.
 */
export const RESOURCES: readonly Resource[] = [
  API_KEYS,
  AGENT_INGRESSES,
  EVENT_DESTINATIONS,
  EVENT_SUBSCRIPTIONS,
  ...FAMILIES.map((family) => family.resource),
];
