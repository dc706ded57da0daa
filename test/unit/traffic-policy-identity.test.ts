import { constants, createHash, generateKeyPairSync, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cookieSealer,
  requestCookies,
} from '../../src/agent-plane/policy/identity/sealed-cookie.ts';
import { compilePolicy, PolicyError } from '../../src/agent-plane/policy/index.ts';
import {
  type FakeClock,
  policyServices,
  requestExchange,
  runRequest,
} from '../helpers/policy-exchange.ts';

// The identity actions run as the edge runs them (policy-exchange.ts), against a real OpenID
// provider (npm oidc-provider) on a port of this machine, driven here without a browser (the
// e2e test drives one): configuration refusals, the authorization redirects of the named OAuth
// providers (which cannot be reached from here), sessions under a clock the test moves, and
// jwt-validation's signatures and claims.

const CLIENT_ID = 'unit-app';
const CLIENT_SECRET = 'unit app secret';
const APP = 'https://app.example.test';

function refused(text: string): string {
  try {
    compilePolicy(text);
  } catch (err) {
    if (err instanceof PolicyError) return err.message;
    throw err;
  }
  throw new Error('accepted');
}

const action = (type: string, config: Record<string, unknown>) =>
  JSON.stringify({ on_http_request: [{ actions: [{ type, config }] }] });

/** The cookies an exchange set, as a Cookie field value. */
const cookieField = (setCookies: string[]) => setCookies.map((c) => c.split(';')[0]).join('; ');

describe('identity actions refuse what they cannot do, with where', () => {
  it('refuses a login without client credentials, unknown fields, bad durations and flow parameters', () => {
    const oidc = (config: Record<string, unknown>) =>
      refused(action('openid-connect', { issuer_url: 'https://id.example.com', ...config }));
    expect(oidc({})).toMatch(/config\.client_id.*no managed applications/);
    const creds = { client_id: 'a', client_secret: 'b' };
    expect(oidc({ ...creds, cookie_prefix: 'x' })).toMatch(/unknown field 'cookie_prefix'/);
    expect(oidc({ ...creds, max_session_duration: 'forever' })).toMatch(
      /config\.max_session_duration.*'forever' is not a duration/,
    );
    expect(oidc({ ...creds, authz_url_params: { state: 'x' } })).toMatch(
      /authz_url_params\.state.*set by the login flow/,
    );
    // oauth names its idle bound idle_session_timeout, as ngrok's docs do.
    expect(
      refused(action('oauth', { provider: 'github', ...creds, idle_session_duration: '1h' })),
    ).toMatch(/unknown field 'idle_session_duration'/);
    expect(refused(action('oauth', { provider: 'myspace', ...creds }))).toMatch(
      /'myspace' is not supported; the providers are amazon, facebook, github, gitlab, google, linkedin, microsoft, twitch/,
    );
    expect(refused(action('oauth', { provider: 'google' }))).toMatch(/no managed applications/);
  });

  it('refuses jwt-validation without a key-set algorithm, with a duplicate issuer or no tokens', () => {
    const jwt = (patch: Record<string, unknown>) =>
      refused(
        action('jwt-validation', {
          issuer: { allow_list: [{ value: 'https://id.example.com' }] },
          http: {
            tokens: [{ type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' }],
          },
          jws: {
            allowed_algorithms: ['RS256'],
            keys: { sources: { additional_jkus: ['https://id.example.com/jwks'] } },
          },
          ...patch,
        }),
      );
    const keys = { sources: { additional_jkus: ['https://id.example.com/jwks'] } };
    expect(jwt({ jws: { allowed_algorithms: ['none'], keys } })).toMatch(
      /allowed_algorithms\.0.*must be one of "RS256"/,
    );
    expect(jwt({ jws: { allowed_algorithms: ['HS256'], keys } })).toMatch(/must be one of/);
    expect(
      jwt({ issuer: { allow_list: [{ value: 'https://a' }, { value: 'https://a' }] } }),
    ).toMatch(/issuer\.allow_list.*'https:\/\/a' is listed twice/);
    expect(jwt({ http: { tokens: [] } })).toMatch(/http\.tokens/);
  });

  it("accepts ngrok's documented examples (real values in place of the placeholders)", () => {
    const docs = [
      // traffic-policy/actions/oidc: the basic example; and the migration guide's `oidc`.
      'on_http_request:\n  - actions:\n      - type: openid-connect\n        config:\n          issuer_url: https://example.okta.com\n          client_id: abc\n          client_secret: def\n          scopes:\n            - openid\n            - profile\n            - email\n',
      'on_http_request:\n  - actions:\n    - type: oidc\n      config:\n        issuer_url: https://example.com\n        client_id: abc\n        client_secret: def\n        scopes:\n          - openid\n          - email\n        allow_cors_preflight: false\n        auth_cookie_domain: auth.example.com\n        max_session_duration: "3600s"\n        idle_session_duration: "600s"\n        userinfo_refresh_interval: "300s"\n',
      // traffic-policy/actions/oauth: the GitHub example.
      "on_http_request:\n  - actions:\n      - type: oauth\n        config:\n          provider: github\n          client_id: 'abc'\n          client_secret: 'def'\n          scopes:\n            - read:user\n            - read:org\n",
      // traffic-policy/actions/jwt-validation: the basic example.
      "on_http_request:\n  - actions:\n      - type: jwt-validation\n        config:\n          issuer:\n            allow_list:\n              - value: https://example.com/issuer\n          audience:\n            allow_list:\n              - value: urn:example:api\n          http:\n            tokens:\n              - type: access_token\n                method: header\n                name: Authorization\n                prefix: 'Bearer '\n              - type: it+jwt\n                method: body\n                name: _id_token\n          jws:\n            allowed_algorithms:\n              - RS256\n              - ES256\n            keys:\n              sources:\n                additional_jkus:\n                  - https://example.com/issuer/jku\n",
    ];
    for (const text of docs) expect(compilePolicy(text).types.size).toBe(1);
  });
});

describe('oauth sends the browser to the named provider', () => {
  const services = policyServices();
  const sealer = cookieSealer(services.cookieKeys);

  async function redirectOf(provider: string, target = '/private?a=1') {
    const x = await runRequest(
      action('oauth', {
        provider,
        client_id: 'the-client',
        client_secret: 'the-secret',
        scopes: ['extra:scope'],
        authz_url_params: { hd: 'example.com' },
      }),
      requestExchange({ target }, services),
    );
    expect(x.answer?.statusCode).toBe(302);
    expect(x.decisions.oauth).toEqual({
      decision: 'block',
      appClientId: 'the-client',
      userId: '',
      userName: '',
    });
    const [nonce] = x.setCookies;
    expect(nonce).toMatch(
      /^ngrok_nonce=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=600$/,
    );
    const pending = sealer.open(
      'ngrok_nonce',
      requestCookies([nonce]).get('ngrok_nonce')!,
    ) as Record<string, string>;
    return { url: new URL(x.answer!.headers.location[0]), pending };
  }

  it.each([
    ['github', 'https://github.com/login/oauth/authorize', 'read:user read:org extra:scope', true],
    [
      'google',
      'https://accounts.google.com/o/oauth2/v2/auth',
      'https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile extra:scope',
      true,
    ],
    [
      'microsoft',
      'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      'User.Read extra:scope',
      true,
    ],
    ['twitch', 'https://id.twitch.tv/oauth2/authorize', 'user:read:email extra:scope', false],
  ])(
    '%s: its documented authorization endpoint, with state and (where it takes it) PKCE',
    async (provider, endpoint, scope, pkce) => {
      const { url, pending } = await redirectOf(provider);
      expect(`${url.origin}${url.pathname}`).toBe(endpoint);
      const q = url.searchParams;
      expect(q.get('response_type')).toBe('code');
      expect(q.get('client_id')).toBe('the-client');
      expect(q.get('redirect_uri')).toBe(`${APP}/ngrok/callback`);
      expect(q.get('scope')).toBe(scope);
      expect(q.get('hd')).toBe('example.com');
      // The sealed nonce cookie holds what the callback checks: the state, the verifier, the path.
      expect(q.get('state')).toBe(pending.state);
      expect(pending.to).toBe('/private?a=1');
      const challenge = createHash('sha256').update(pending.verifier).digest('base64url');
      expect(q.get('code_challenge')).toBe(pkce ? challenge : null);
      expect(q.get('client_secret')).toBeNull();
    },
  );

  it('with two logins, each answers the callback of its own login only (by auth_id)', async () => {
    const creds = { client_id: 'c', client_secret: 's' };
    const policy = JSON.stringify({
      on_http_request: [
        {
          actions: [
            { type: 'oauth', config: { provider: 'github', auth_id: 'gh', ...creds } },
            { type: 'oauth', config: { provider: 'gitlab', auth_id: 'lab', ...creds } },
          ],
        },
      ],
    });
    const callback = (cookie: string) =>
      runRequest(
        policy,
        requestExchange(
          { target: '/ngrok/callback?code=x&state=y', headers: { cookie } },
          services,
        ),
      );
    const forLab = await callback('ngrok_nonce_lab=not-sealed');
    expect(forLab.answer?.statusCode).toBe(400);
    expect(forLab.answer?.body).toMatch(/href="\/ngrok\/login\?auth_id=lab"/);
    const forGh = await callback('ngrok_nonce_gh=not-sealed');
    expect(forGh.answer?.body).toMatch(/href="\/ngrok\/login\?auth_id=gh"/);
  });

  it('/ngrok/login asks the provider to log in again; a redirect_path elsewhere is not followed', async () => {
    const { url, pending } = await redirectOf(
      'github',
      '/ngrok/login?redirect_path=//evil.example',
    );
    expect(url.searchParams.get('prompt')).toBe('login');
    expect(pending.to).toBe('/');
  });
});

describe('openid-connect with a real provider, under a clock the test moves', () => {
  let server: Server;
  let issuer: string;
  const clock: FakeClock = { now: Date.now() };
  const services = policyServices(clock);
  let policy: string;

  beforeAll(async () => {
    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [`${APP}/ngrok/callback`],
          response_types: ['code'],
          grant_types: ['authorization_code'],
        },
      ],
      findAccount: (_ctx, sub) => ({
        accountId: sub,
        claims: () => ({ sub, name: 'Grace Hopper' }),
      }),
      claims: { openid: ['sub'], profile: ['name'] },
      cookies: { keys: ['unit test provider cookies'] },
    });
    server.on('request', provider.callback());
    policy = action('openid-connect', {
      issuer_url: issuer,
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      scopes: ['profile'],
      max_session_duration: '1h',
      idle_session_duration: '1m',
      allow_cors_preflight: true,
    });
  });
  afterAll(() => server?.close());

  /** Walks the provider's login and consent pages as a browser would; the callback's URL. */
  async function logIn(authorizeUrl: string): Promise<string> {
    const jar = new Map<string, string>();
    let url = authorizeUrl;
    let form: URLSearchParams | undefined;
    for (let hop = 0; hop < 12; hop++) {
      const response = await fetch(url, {
        method: form === undefined ? 'GET' : 'POST',
        body: form,
        redirect: 'manual',
        headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
      });
      for (const c of response.headers.getSetCookie()) {
        const [pair] = c.split(';');
        jar.set(pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1));
      }
      form = undefined;
      const location = response.headers.get('location');
      if (location?.startsWith(`${APP}/`)) return location;
      if (location !== null) {
        url = new URL(location, url).toString();
        continue;
      }
      const page = await response.text();
      const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1];
      form = new URLSearchParams({ prompt: prompt!, login: 'grace', password: 'any' });
    }
    throw new Error('the login did not come back');
  }

  it('logs in, keeps the session while it is used, and ends it when idle or too old', async () => {
    const first = await runRequest(policy, requestExchange({ target: '/report' }, services));
    const callback = new URL(await logIn(first.answer!.headers.location[0]));
    expect(callback.pathname).toBe('/ngrok/callback');
    const back = await runRequest(
      policy,
      requestExchange(
        {
          target: `${callback.pathname}${callback.search}`,
          headers: { cookie: cookieField(first.setCookies) },
        },
        services,
      ),
    );
    expect(back.answer?.headers.location).toEqual(['/report']);
    expect(back.decisions.oauth).toEqual({
      decision: 'allow',
      appClientId: CLIENT_ID,
      userId: 'grace',
      userName: 'Grace Hopper',
    });
    const session = back.setCookies.find((c) => c.startsWith('ngrok_session='))!;
    expect(session).toMatch(/Max-Age=3600$/);
    const visit = async (cookie: string, target = '/report') =>
      runRequest(
        policy,
        requestExchange({ target, headers: { cookie: cookie.split(';')[0] } }, services),
      );

    // Another account's endpoint with the same provider and client does not take the session.
    const elsewhere = requestExchange(
      { target: '/report', headers: { cookie: session.split(';')[0] } },
      services,
    );
    const other = await runRequest(policy, { ...elsewhere, accountId: 'acct_other' });
    expect(other.answer?.statusCode).toBe(302);

    clock.now += 50_000;
    const used = await visit(session);
    expect(used.answer).toBeUndefined();
    const oidc = used.values.actions.ngrok.oidc as Record<string, any>;
    expect(oidc.identity).toMatchObject({ name: 'Grace Hopper', provider_user_id: 'grace' });
    expect(oidc.identity_token).toMatch(/^eyJ/);
    // The idle bound moves with each request: a renewed cookie.
    const renewed = used.setCookies.find((c) => c.startsWith('ngrok_session='))!;

    clock.now += 50_000;
    const idle = await visit(session);
    expect(idle.answer?.statusCode).toBe(302);
    expect(idle.values.actions.ngrok.oidc).toMatchObject({
      session_timed_out: true,
      session_max_duration_reached: false,
    });
    expect((await visit(renewed)).answer).toBeUndefined();

    // A CORS preflight passes without a session (allow_cors_preflight).
    const preflight = await runRequest(
      policy,
      requestExchange(
        {
          method: 'OPTIONS',
          headers: { origin: 'https://x.example', 'access-control-request-method': 'POST' },
        },
        services,
      ),
    );
    expect(preflight.answer).toBeUndefined();

    clock.now += 3_600_000;
    const old = await visit(renewed);
    expect(old.answer?.statusCode).toBe(302);
    expect(old.values.actions.ngrok.oidc).toMatchObject({ session_max_duration_reached: true });
  });

  it('refuses a callback whose state is not the login under way', async () => {
    const first = await runRequest(policy, requestExchange({ target: '/' }, services));
    const forged = await runRequest(
      policy,
      requestExchange(
        {
          target: '/ngrok/callback?code=abc&state=forged',
          headers: { cookie: cookieField(first.setCookies) },
        },
        services,
      ),
    );
    expect(forged.answer?.statusCode).toBe(400);
    expect(forged.decisions.oauth.decision).toBe('block');
    const none = await runRequest(
      policy,
      requestExchange({ target: '/ngrok/callback?code=abc&state=x' }, services),
    );
    expect(none.answer?.statusCode).toBe(400);
  });
});

describe('jwt-validation checks signatures of every JWS family and the claims', () => {
  const keys = {
    RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
    PS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    EdDSA: generateKeyPairSync('ed25519'),
  };
  let jwks: Server;
  let fetches = 0;
  let policy: string;

  function token(alg: keyof typeof keys, claims: Record<string, unknown>, kid: string = alg) {
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const input = `${part({ alg, kid })}.${part(claims)}`;
    const key = keys[alg].privateKey;
    const data = Buffer.from(input);
    const signature =
      alg === 'EdDSA'
        ? sign(null, data, key)
        : alg === 'ES256'
          ? sign('sha256', data, { key, dsaEncoding: 'ieee-p1363' })
          : alg === 'PS256'
            ? sign('sha256', data, {
                key,
                padding: constants.RSA_PKCS1_PSS_PADDING,
                saltLength: 32,
              })
            : sign('sha256', data, key);
    return `${input}.${signature.toString('base64url')}`;
  }

  beforeAll(async () => {
    jwks = createServer((_request, response) => {
      fetches++;
      const list = Object.entries(keys).map(([kid, pair]) => ({
        ...pair.publicKey.export({ format: 'jwk' }),
        kid,
      }));
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ keys: list }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`;
    policy = action('jwt-validation', {
      issuer: { allow_list: [{ value: 'https://id.example.com' }] },
      audience: { allow_list: [{ value: 'api' }] },
      http: { tokens: [{ type: 'jwt', method: 'header', name: 'X-Token' }] },
      jws: {
        allowed_algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
        keys: { sources: { additional_jkus: [url] } },
      },
    });
  });
  afterAll(() => jwks?.close());

  it('accepts each algorithm, refuses wrong claims, and fetches the key set once', async () => {
    const clock: FakeClock = { now: Date.now() };
    const services = policyServices(clock);
    const now = Math.floor(clock.now / 1000);
    const good = {
      iss: 'https://id.example.com',
      aud: ['other', 'api'],
      exp: now + 60,
      sub: 'svc',
    };
    const run = (value: string) =>
      runRequest(policy, requestExchange({ headers: { 'x-token': value } }, services));
    for (const alg of ['RS256', 'PS256', 'ES256', 'EdDSA'] as const) {
      const x = await run(token(alg, good));
      expect(x.answer, alg).toBeUndefined();
      expect((x.values.actions.ngrok.jwt_validation as any).tokens[0]).toMatchObject({
        verified: true,
        location: 'header',
        payload: { sub: 'svc' },
      });
    }
    expect(fetches).toBe(1);
    const why = async (value: string) => {
      const x = await run(value);
      expect(x.answer?.statusCode).toBe(401);
      return (x.values.actions.ngrok.jwt_validation as any).error.message as string;
    };
    expect(await why(token('RS256', { ...good, iss: 'https://evil' }))).toMatch(
      /issuer is not allowed/,
    );
    expect(await why(token('RS256', { ...good, aud: 'other' }))).toMatch(/audience is not allowed/);
    // Within the 30 s skew an expired token still passes; past it, refused.
    expect((await run(token('ES256', { ...good, exp: now - 20 }))).answer).toBeUndefined();
    expect(await why(token('ES256', { ...good, exp: now - 40 }))).toMatch(/expired/);
    expect(await why(token('ES256', { ...good, nbf: now + 120 }))).toMatch(/not valid yet/);
    // Signed by one key, named as another: refused (the RSA signature is not the EC key's).
    expect(await why(token('RS256', good, 'ES256'))).toMatch(/signature is not valid/);
    // An unknown kid fetches the set again, at most once per 30 s.
    expect(await why(token('RS256', good, 'rotated'))).toMatch(/signature is not valid/);
    expect(await why(token('RS256', good, 'rotated'))).toMatch(/signature is not valid/);
    expect(fetches).toBe(1);
    clock.now += 31_000;
    await why(token('RS256', { ...good, exp: now + 120 }, 'rotated'));
    expect(fetches).toBe(2);
  });
});
