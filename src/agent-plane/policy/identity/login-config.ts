import { type CompileContext, parseDuration, type Schema } from '../action.ts';
import type { LoginSettings } from './login-flow.ts';

// The config fields `openid-connect` and `oauth` share (ngrok's names), their schema and their
// checks: what the two actions' configs become before loginRun() runs them.

/** The shared fields; `idleField` is the idle bound's name (ngrok's docs name it per action). */
export interface LoginConfigFields {
  auth_id?: string;
  client_id?: string;
  client_secret?: string;
  scopes?: string[];
  authz_url_params?: Record<string, string>;
  max_session_duration?: string;
  idle_session_duration?: string;
  idle_session_timeout?: string;
  userinfo_refresh_interval?: string;
  allow_cors_preflight?: boolean;
  auth_cookie_domain?: string;
}

const DEFAULT_MAX_SESSION_MS = 24 * 3_600_000;
const HOSTNAME =
  '^\\.?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$';

/** The schema's properties of the shared fields. */
export function loginProperties(
  idleField: 'idle_session_duration' | 'idle_session_timeout',
): Schema {
  return {
    auth_id: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
    client_id: { type: 'string', minLength: 1, maxLength: 1024 },
    client_secret: { type: 'string', minLength: 1, maxLength: 4096 },
    scopes: {
      type: 'array',
      maxItems: 64,
      items: { type: 'string', pattern: '^[!#-\\[\\]-~]{1,256}$' },
    },
    authz_url_params: {
      type: 'object',
      maxProperties: 32,
      propertyNames: { pattern: '^[A-Za-z0-9_.-]{1,64}$' },
      additionalProperties: { type: 'string', maxLength: 1024 },
    },
    max_session_duration: { type: 'string', maxLength: 32 },
    [idleField]: { type: 'string', maxLength: 32 },
    userinfo_refresh_interval: { type: 'string', maxLength: 32 },
    allow_cors_preflight: { type: 'boolean' },
    auth_cookie_domain: { type: 'string', maxLength: 253, pattern: HOSTNAME },
  };
}

/** The parameters the flow's own query uses: a config may not set them. */
const FLOW_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'nonce',
  'code_challenge',
  'code_challenge_method',
];

function duration(
  ctx: CompileContext,
  field: string,
  text: string | undefined,
): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === undefined || ms < 1000)
    ctx.fail(field, `'${text}' is not a duration of at least 1s (e.g. 30m, 12h)`);
  return ms;
}

/** The shared part of the flow's settings, checked. */
export function loginSettings(
  config: LoginConfigFields,
  ctx: CompileContext,
  idleField: 'idle_session_duration' | 'idle_session_timeout',
): Omit<LoginSettings, 'result' | 'providerKey' | 'resolve'> {
  if (config.client_id === undefined || config.client_secret === undefined) {
    ctx.fail(
      config.client_id === undefined ? 'client_id' : 'client_secret',
      'client_id and client_secret are required: this service has no managed applications',
    );
  }
  for (const name of Object.keys(config.authz_url_params ?? {})) {
    if (FLOW_PARAMS.includes(name))
      ctx.fail(`authz_url_params.${name}`, 'is set by the login flow itself');
  }
  return {
    authId: config.auth_id ?? '',
    clientId: ctx.template(config.client_id, 'client_id'),
    clientSecret: ctx.template(config.client_secret, 'client_secret'),
    scopes: config.scopes ?? [],
    authzUrlParams: config.authz_url_params ?? {},
    maxSessionMs:
      duration(ctx, 'max_session_duration', config.max_session_duration) ?? DEFAULT_MAX_SESSION_MS,
    idleSessionMs: duration(ctx, idleField, config[idleField]),
    userinfoRefreshMs: duration(ctx, 'userinfo_refresh_interval', config.userinfo_refresh_interval),
    allowCorsPreflight: config.allow_cors_preflight ?? false,
    cookieDomain: config.auth_cookie_domain,
  };
}
