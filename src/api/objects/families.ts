import { CREDENTIALS_FAMILY } from '../credentials/family.ts';
import { RESERVED_DOMAINS_FAMILY } from '../reserved-domains/family.ts';
import type { Family } from './family.ts';

/** Every family of account objects, in the order the API registers them (one line each). */
export const FAMILIES: readonly Family[] = [CREDENTIALS_FAMILY, RESERVED_DOMAINS_FAMILY];
