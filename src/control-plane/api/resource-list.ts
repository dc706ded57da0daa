import { AGENT_INGRESSES } from './agent-ingresses/resource.ts';
import { API_KEYS } from './api-keys/resource.ts';
import { CERTIFICATE_AUTHORITIES } from './certificate-authorities/resource.ts';
import { CREDENTIALS } from './credentials/resource.ts';
import { ENDPOINTS } from './endpoints/resource.ts';
import { EVENT_DESTINATIONS } from './event-destinations/resource.ts';
import { EVENT_SUBSCRIPTIONS } from './event-subscriptions/resource.ts';
import { IP_POLICIES } from './ip-policies/resource.ts';
import { IP_POLICY_RULES } from './ip-policy-rules/resource.ts';
import { IP_RESTRICTIONS } from './ip-restrictions/resource.ts';
import { RESERVED_ADDRS } from './reserved-addrs/resource.ts';
import { RESERVED_DOMAINS } from './reserved-domains/resource.ts';
import type { Resource } from './resource-types.ts';
import { SSH_CERTIFICATE_AUTHORITIES } from './ssh-certificate-authorities/resource.ts';
import { SSH_HOST_CERTIFICATES, SSH_USER_CERTIFICATES } from './ssh-certificates/resource.ts';
import { SSH_CREDENTIALS } from './ssh-credentials/resource.ts';
import { TLS_CERTIFICATES } from './tls-certificates/resource.ts';

/**
 * Every resource's declaration, in the order the API registers them: the OpenAPI document, the
 * CLI and the isolation sweep loop over it. Declarations only, so the CLI loads none of the
 * families' code (a filter compiler, PKI); objects/families.ts holds the same resources' families
 * in the same order, and test/unit/resource-list.test.ts holds the two lists equal.
 */
export const RESOURCES: readonly Resource[] = [
  API_KEYS,
  AGENT_INGRESSES,
  EVENT_DESTINATIONS,
  EVENT_SUBSCRIPTIONS,
  CREDENTIALS,
  CERTIFICATE_AUTHORITIES,
  TLS_CERTIFICATES,
  RESERVED_DOMAINS,
  IP_POLICIES,
  IP_POLICY_RULES,
  IP_RESTRICTIONS,
  RESERVED_ADDRS,
  SSH_CREDENTIALS,
  SSH_CERTIFICATE_AUTHORITIES,
  SSH_HOST_CERTIFICATES,
  SSH_USER_CERTIFICATES,
  ENDPOINTS,
];
