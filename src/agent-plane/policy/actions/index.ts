import type { ActionDefinition } from '../action.ts';
import { ADD_HEADERS } from './add-headers.ts';
import { BASIC_AUTH } from './basic-auth.ts';
import { CIRCUIT_BREAKER } from './circuit-breaker.ts';
import { CLOSE_CONNECTION } from './close-connection.ts';
import { COMPRESS_RESPONSE } from './compress-response.ts';
import { CUSTOM_RESPONSE } from './custom-response.ts';
import { DENY } from './deny.ts';
import { FORWARD_INTERNAL } from './forward-internal.ts';
import { JWT_VALIDATION } from './jwt-validation.ts';
import { LOG } from './log.ts';
import { OAUTH } from './oauth.ts';
import { OIDC, OIDC_ALIAS } from './oidc.ts';
import { RATE_LIMIT } from './rate-limit.ts';
import { REDIRECT } from './redirect.ts';
import { REMOVE_HEADERS } from './remove-headers.ts';
import { RESTRICT_IPS } from './restrict-ips.ts';
import { SET_VARS } from './set-vars.ts';
import { URL_REWRITE } from './url-rewrite.ts';
import { VERIFY_WEBHOOK } from './verify-webhook.ts';

/** Every action type a policy may use, by ngrok's name (one line each). */
export const ACTIONS: ReadonlyMap<string, ActionDefinition<never>> = new Map(
  [
    ADD_HEADERS,
    BASIC_AUTH,
    CIRCUIT_BREAKER,
    CLOSE_CONNECTION,
    COMPRESS_RESPONSE,
    CUSTOM_RESPONSE,
    DENY,
    FORWARD_INTERNAL,
    JWT_VALIDATION,
    LOG,
    OAUTH,
    OIDC,
    OIDC_ALIAS,
    RATE_LIMIT,
    REDIRECT,
    REMOVE_HEADERS,
    RESTRICT_IPS,
    SET_VARS,
    URL_REWRITE,
    VERIFY_WEBHOOK,
  ].map((a) => [a.type, a as unknown as ActionDefinition<never>]),
);
