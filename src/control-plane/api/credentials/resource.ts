import type { Resource } from '../resource-types.ts';
import { COMMON, describedBy, strings } from '../resources.ts';

/** `acl`: bind rules of a credential (the spec's Authentication rules, docs/decisions.md); shared with SSH public keys. */
export const ACL_FIELD = {
  schema: { ...strings, description: 'bind:<domain>, bind:*.<domain> or *; empty: no limit' },
  doc: 'the hostnames its agents may bind; empty: any',
};

/** Tunnel credentials: the authtokens agents connect with. */
export const CREDENTIALS: Resource = {
  path: 'credentials',
  title: 'tunnel credential',
  idPrefix: 'cr',
  listKey: 'credentials',
  audit: 'tunnel_credential',
  example: ({ tag }) => ({ description: tag, acl: [`bind:*.${tag}.example.org`] }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    token: {
      schema: { type: ['string', 'null'] },
      serverAssigned: true,
      shownOnce: true,
      doc: 'the authtoken; shown only when the credential is created, null afterwards',
    },
    acl: ACL_FIELD,
    owner_id: {
      schema: { type: ['string', 'null'] },
      serverAssigned: true,
      doc: 'always null: credentials belong to the account, not to a user',
    },
  },
};
