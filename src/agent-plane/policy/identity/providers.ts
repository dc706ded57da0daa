// The OAuth providers the `oauth` action names, with the endpoints each documents: where the
// browser is sent to log in, where the code becomes a token, and where the user is read (and
// how its answer names the user). The scopes are ngrok's minimum for each. None of these hosts
// is reachable from the machines this service is tested on (docs/traffic-policy.md says what
// was tested); the flow they run is the one `openid-connect` runs, which is tested end to end.

/** Who logged in, as the event and `actions.ngrok.<action>.identity` report it. */
export interface User {
  id: string;
  name: string;
  email: string;
}

/** A provider's endpoints and the shape of its answers, resolved for one login. */
export interface ProviderEndpoints {
  authorizationUrl: string;
  tokenUrl: string;
  userinfoUrl?: string;
  /** How the client authenticates at the token endpoint (RFC 6749 §2.3.1). */
  clientAuth: 'client_secret_basic' | 'client_secret_post';
  /** Whether the provider takes PKCE (RFC 7636) with S256. */
  pkce: boolean;
  /** Scopes always asked for (the user's `scopes` are added). */
  scopes: readonly string[];
  /** Extra headers of the userinfo request (Twitch wants the client id). */
  userinfoHeaders?: (clientId: string) => Record<string, string>;
  /** The user in the userinfo answer (or an ID token's claims). */
  userOf(answer: Record<string, unknown>): User;
}

const text = (v: unknown): string =>
  typeof v === 'string' || typeof v === 'number' ? String(v) : '';

/** OpenID Connect's standard claims (sub, name, email), as ID tokens and userinfo hold them. */
export function oidcUser(c: Record<string, unknown>): User {
  return {
    id: text(c.sub),
    name: text(c.name) || text(c.preferred_username) || text(c.email),
    email: text(c.email),
  };
}

function fixed(
  authorizationUrl: string,
  tokenUrl: string,
  userinfoUrl: string,
  scopes: string[],
  userOf: (a: Record<string, unknown>) => User,
  extra: Partial<ProviderEndpoints> = {},
): ProviderEndpoints {
  return {
    authorizationUrl,
    tokenUrl,
    userinfoUrl,
    clientAuth: 'client_secret_post',
    pkce: true,
    scopes,
    userOf,
    ...extra,
  };
}

/** The named providers, by ngrok's identifiers. */
export const OAUTH_PROVIDERS: ReadonlyMap<string, ProviderEndpoints> = new Map([
  [
    'amazon',
    fixed(
      'https://www.amazon.com/ap/oa',
      'https://api.amazon.com/auth/o2/token',
      'https://api.amazon.com/user/profile',
      ['profile'],
      (a) => ({ id: text(a.user_id), name: text(a.name), email: text(a.email) }),
    ),
  ],
  [
    'facebook',
    fixed(
      'https://www.facebook.com/v19.0/dialog/oauth',
      'https://graph.facebook.com/v19.0/oauth/access_token',
      'https://graph.facebook.com/me?fields=id,name,email',
      ['email'],
      (a) => ({ id: text(a.id), name: text(a.name), email: text(a.email) }),
      { pkce: false },
    ),
  ],
  [
    'github',
    fixed(
      'https://github.com/login/oauth/authorize',
      'https://github.com/login/oauth/access_token',
      'https://api.github.com/user',
      ['read:user', 'read:org'],
      (a) => ({ id: text(a.id), name: text(a.login), email: text(a.email) }),
    ),
  ],
  [
    'gitlab',
    fixed(
      'https://gitlab.com/oauth/authorize',
      'https://gitlab.com/oauth/token',
      'https://gitlab.com/oauth/userinfo',
      ['openid', 'profile', 'email'],
      oidcUser,
    ),
  ],
  [
    'google',
    fixed(
      'https://accounts.google.com/o/oauth2/v2/auth',
      'https://oauth2.googleapis.com/token',
      'https://openidconnect.googleapis.com/v1/userinfo',
      [
        'https://www.googleapis.com/auth/userinfo.email',
        'https://www.googleapis.com/auth/userinfo.profile',
      ],
      oidcUser,
    ),
  ],
  [
    'linkedin',
    fixed(
      'https://www.linkedin.com/oauth/v2/authorization',
      'https://www.linkedin.com/oauth/v2/accessToken',
      'https://api.linkedin.com/v2/me',
      ['r_emailaddress', 'r_liteprofile'],
      (a) => ({
        id: text(a.id),
        name: [text(a.localizedFirstName), text(a.localizedLastName)].filter(Boolean).join(' '),
        email: '',
      }),
      { pkce: false },
    ),
  ],
  [
    'microsoft',
    fixed(
      'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      'https://login.microsoftonline.com/common/oauth2/v2.0/token',
      'https://graph.microsoft.com/v1.0/me',
      ['User.Read'],
      (a) => ({
        id: text(a.id),
        name: text(a.displayName),
        email: text(a.mail) || text(a.userPrincipalName),
      }),
    ),
  ],
  [
    'twitch',
    fixed(
      'https://id.twitch.tv/oauth2/authorize',
      'https://id.twitch.tv/oauth2/token',
      'https://api.twitch.tv/helix/users',
      ['user:read:email'],
      (a) => {
        const user = ((a.data as Record<string, unknown>[] | undefined) ?? [])[0] ?? {};
        return {
          id: text(user.id),
          name: text(user.display_name) || text(user.login),
          email: text(user.email),
        };
      },
      { pkce: false, userinfoHeaders: (clientId) => ({ 'client-id': clientId }) },
    ),
  ],
]);
