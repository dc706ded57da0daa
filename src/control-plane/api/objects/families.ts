import { AGENT_INGRESSES_FAMILY } from '../agent-ingresses/family.ts';
import { API_KEYS_FAMILY } from '../api-keys/family.ts';
import { CERTIFICATE_AUTHORITIES_FAMILY } from '../certificate-authorities/family.ts';
import { CREDENTIALS_FAMILY } from '../credentials/family.ts';
import { ENDPOINTS_FAMILY } from '../endpoints/family.ts';
import { EVENT_DESTINATIONS_FAMILY } from '../event-destinations/family.ts';
import { EVENT_SUBSCRIPTIONS_FAMILY } from '../event-subscriptions/family.ts';
import { IP_POLICIES_FAMILY } from '../ip-policies/family.ts';
import { IP_POLICY_RULES_FAMILY } from '../ip-policy-rules/family.ts';
import { IP_RESTRICTIONS_FAMILY } from '../ip-restrictions/family.ts';
import { RESERVED_ADDRS_FAMILY } from '../reserved-addrs/family.ts';
import { RESERVED_DOMAINS_FAMILY } from '../reserved-domains/family.ts';
import { SSH_CERTIFICATE_AUTHORITIES_FAMILY } from '../ssh-certificate-authorities/family.ts';
import {
  SSH_HOST_CERTIFICATES_FAMILY,
  SSH_USER_CERTIFICATES_FAMILY,
} from '../ssh-certificates/family.ts';
import { SSH_CREDENTIALS_FAMILY } from '../ssh-credentials/family.ts';
import { TLS_CERTIFICATES_FAMILY } from '../tls-certificates/family.ts';
import type { Family } from './family.ts';

/** Every REST resource's family, in the order the API registers them (resource-list.ts's order). */
export const FAMILIES: readonly Family[] = [
  API_KEYS_FAMILY,
  AGENT_INGRESSES_FAMILY,
  EVENT_DESTINATIONS_FAMILY,
  EVENT_SUBSCRIPTIONS_FAMILY,
  CREDENTIALS_FAMILY,
  CERTIFICATE_AUTHORITIES_FAMILY,
  TLS_CERTIFICATES_FAMILY,
  RESERVED_DOMAINS_FAMILY,
  IP_POLICIES_FAMILY,
  IP_POLICY_RULES_FAMILY,
  IP_RESTRICTIONS_FAMILY,
  RESERVED_ADDRS_FAMILY,
  SSH_CREDENTIALS_FAMILY,
  SSH_CERTIFICATE_AUTHORITIES_FAMILY,
  SSH_HOST_CERTIFICATES_FAMILY,
  SSH_USER_CERTIFICATES_FAMILY,
  ENDPOINTS_FAMILY,
];
