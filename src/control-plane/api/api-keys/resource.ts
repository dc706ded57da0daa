import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy } from '../resources.ts';

/** API keys: the bearer tokens of this REST API. */
export const API_KEYS: Resource = {
  path: 'api_keys',
  title: 'API key',
  idPrefix: 'ak',
  listKey: 'keys',
  audit: 'api_key',
  example: ({ tag }) => ({ description: tag }),
  // In the order answers have always shown them (the table of `cli api … -o table` follows it).
  fields: {
    id: COMMON.id,
    uri: COMMON.uri,
    ...describedBy('maxBytes'),
    created_at: COMMON.created_at,
    token: {
      schema: { type: ['string', 'null'] },
      serverAssigned: true,
      shownOnce: true,
      doc: 'the bearer token; shown only when the key is created, null afterwards',
    },
  },
};
