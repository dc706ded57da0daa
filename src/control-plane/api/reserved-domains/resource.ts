import type { Resource } from '../resource-types.ts';
import { CERT_POLICY_SHAPE, COMMON, describedBy, str } from '../resources.ts';

const nullableString = { type: ['string', 'null'] };

/** Reserved domains: a service subdomain or a custom (optionally wildcard) domain. */
export const RESERVED_DOMAINS: Resource = {
  path: 'reserved_domains',
  title: 'reserved domain',
  idPrefix: 'rd',
  listKey: 'reserved_domains',
  audit: 'domain',
  example: ({ tag }) => ({ domain: `${tag}.example.net`, description: tag }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    domain: {
      schema: str,
      required: true,
      notUpdatable: 'reserve another domain',
      doc: 'the hostname; may start with *. (custom domains only); lower-cased',
    },
    region: {
      schema: nullableString,
      notUpdatable: 'reserve the domain again (the field is deprecated: traffic is global)',
      doc: 'deprecated; null by default',
    },
    cname_target: {
      schema: nullableString,
      serverAssigned: true,
      doc: 'the CNAME to publish for a custom domain; null under the service domain',
    },
    certificate_id: {
      schema: nullableString,
      writeOnly: true,
      ref: { path: 'tls_certificates', shownAs: 'certificate' },
      doc: 'an uploaded TLS certificate to serve; wins over an automatic one',
    },
    certificate: {
      schema: { type: ['object', 'null'] },
      serverAssigned: true,
      doc: 'the uploaded TLS certificate served, if any',
    },
    certificate_management_policy: {
      schema: { ...CERT_POLICY_SHAPE, type: ['object', 'null'] },
      doc: 'automatic certificates; null turns them off',
    },
    certificate_management_status: {
      schema: { type: ['object', 'null'] },
      serverAssigned: true,
      doc: 'renewal time and the current provisioning job',
    },
    acme_challenge_cname_target: {
      schema: nullableString,
      serverAssigned: true,
      doc: 'CNAME target of _acme-challenge.<domain>, for custom wildcard domains; null otherwise',
    },
  },
  extraRoutes: [
    {
      name: 'certificate.delete',
      method: 'DELETE',
      path: '/{id}/certificate',
      summary: 'Stop serving the uploaded certificate',
      status: 204,
    },
    {
      name: 'certificate_management_policy.delete',
      method: 'DELETE',
      path: '/{id}/certificate_management_policy',
      summary: 'Turn automatic certificates off',
      status: 204,
    },
  ],
};
