import { defineAction } from '../action.ts';
import {
  type LoginConfigFields,
  loginProperties,
  loginSettings,
} from '../identity/login-config.ts';
import { loginRun } from '../identity/login-flow.ts';
import { OAUTH_PROVIDERS } from '../identity/providers.ts';

// oauth: a browser login with a named provider (GitHub, Google, Microsoft, …) through the
// endpoints it documents (identity/providers.ts); the same flow as openid-connect, the user read
// from the provider's user API. Results in `actions.ngrok.oauth`; the event's oauth.* fields.

interface Config extends LoginConfigFields {
  provider: string;
}

export const OAUTH = defineAction<Config>({
  type: 'oauth',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['provider'],
    properties: {
      provider: { type: 'string', maxLength: 64 },
      ...loginProperties('idle_session_timeout'),
    },
  },
  compile(config, ctx) {
    const endpoints =
      OAUTH_PROVIDERS.get(config.provider) ??
      ctx.fail(
        'provider',
        `'${config.provider}' is not supported; the providers are ${[...OAUTH_PROVIDERS.keys()].join(', ')}`,
      );
    return loginRun({
      ...loginSettings(config, ctx, 'idle_session_timeout'),
      result: 'oauth',
      providerKey: `oauth ${config.provider}`,
      resolve: async () => endpoints,
    });
  },
});
