import { defineAction } from '../action.ts';
import { discover } from '../identity/json-documents.ts';
import {
  type LoginConfigFields,
  loginProperties,
  loginSettings,
} from '../identity/login-config.ts';
import { loginRun } from '../identity/login-flow.ts';
import { oidcUser } from '../identity/providers.ts';

// openid-connect: a browser login with any OpenID provider (`issuer_url`, found by OpenID
// discovery), authorization code with PKCE, state and nonce; the session is a sealed cookie.
// Results in `actions.ngrok.oidc`; the event's oauth.* say who and whether (login-flow.ts).

interface Config extends LoginConfigFields {
  issuer_url: string;
}

export const OIDC = defineAction<Config>({
  type: 'openid-connect',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['issuer_url'],
    properties: {
      issuer_url: { type: 'string', maxLength: 2048 },
      ...loginProperties('idle_session_duration'),
    },
  },
  compile(config, ctx) {
    const issuer = config.issuer_url;
    if (!/^https?:\/\/[^\s?#{}<>]+$/.test(issuer) || !URL.canParse(issuer)) {
      ctx.fail('issuer_url', `'${issuer}' is not an http(s) URL without query or fragment`);
    }
    return loginRun({
      ...loginSettings(config, ctx, 'idle_session_duration'),
      result: 'oidc',
      providerKey: `oidc ${issuer}`,
      async resolve(services) {
        const meta = await discover(services, issuer);
        if (meta.jwks_uri === undefined) throw new Error(`${issuer} publishes no jwks_uri`);
        const auth = meta.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
        const pkce = meta.code_challenge_methods_supported;
        return {
          authorizationUrl: meta.authorization_endpoint,
          tokenUrl: meta.token_endpoint,
          userinfoUrl: meta.userinfo_endpoint,
          clientAuth: auth.includes('client_secret_basic')
            ? 'client_secret_basic'
            : 'client_secret_post',
          pkce: pkce === undefined || pkce.includes('S256'),
          scopes: ['openid'],
          userOf: oidcUser,
          idToken: { issuer: meta.issuer, jwksUri: meta.jwks_uri },
        };
      },
    });
  },
});

/** `oidc`: the name ngrok's migration guide gives the same action (its results are `.oidc`). */
export const OIDC_ALIAS = defineAction<Config>({ ...OIDC, type: 'oidc' });
