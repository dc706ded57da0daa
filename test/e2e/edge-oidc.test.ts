import { generateKeyPairSync, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestService } from '../helpers/service.ts';
import { curl, type SshAgent } from './agents-helpers.ts';
import { boundAgent, eventsOf, trafficEvents } from './edge-helpers.ts';

// openid-connect and jwt-validation at the edge against a real OpenID provider: npm
// `oidc-provider` (the certified implementation) on a port of this machine, with its own login
// pages; Chromium walks the login through the edge to an `ssh -R` agent. jwt-validation checks
// tokens the same provider issues (client_credentials, JWT access tokens), with curl.

const CHROMIUM = '/usr/bin/chromium';
const DOMAIN = 'edge-oidc.example.com';
const HOST = `app.${DOMAIN}`;
const API_HOST = `api.${DOMAIN}`;
const CLIENT_ID = 'edge-app';
const CLIENT_SECRET = 'a client secret of the edge app';
const API = 'urn:agent-ingress:test-api';
const SESSION_S = 4;

/** The provider's signing key: the test signs an expired token with it, as the provider would. */
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = {
  ...privateKey.export({ format: 'jwk' }),
  kid: 'test-key',
  alg: 'RS256',
  use: 'sig',
};

function startProvider(edgePort: number): Promise<{ server: Server; issuer: string }> {
  const server = createServer();
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: CLIENT_ID,
            client_secret: CLIENT_SECRET,
            redirect_uris: [`http://${HOST}:${edgePort}/ngrok/callback`],
            grant_types: ['authorization_code', 'client_credentials'],
            response_types: ['code'],
          },
        ],
        findAccount: (_ctx, sub) => ({
          accountId: sub,
          claims: () => ({ sub, name: 'Ada Lovelace', email: `${sub}@example.com` }),
        }),
        claims: { openid: ['sub'], profile: ['name'], email: ['email'] },
        features: {
          clientCredentials: { enabled: true },
          resourceIndicators: {
            enabled: true,
            getResourceServerInfo: (_ctx, resource) => ({
              scope: 'api',
              audience: resource,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: 'RS256' } },
            }),
          },
        },
        jwks: { keys: [signingJwk as never] },
        cookies: { keys: ['oidc-provider test cookie key'] },
      });
      server.on('request', provider.callback());
      resolve({ server, issuer });
    }),
  );
}

/** A JWT access token from the provider's token endpoint (client_credentials). */
async function clientToken(issuer: string, resource: string): Promise<string> {
  const response = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${encodeURIComponent(CLIENT_SECRET)}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'api' }),
  });
  const body = (await response.json()) as { access_token: string };
  expect(response.status).toBe(200);
  return body.access_token;
}

/** A token signed with the provider's key, with the given claims. */
function signedToken(claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${part({ alg: 'RS256', kid: signingJwk.kid, typ: 'JWT' })}.${part(claims)}`;
  return `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
}

describe('openid-connect and jwt-validation at the edge, with a real OpenID provider', () => {
  const ctx = useTestService();
  let agent: SshAgent;
  let upstream: Server;
  let provider: { server: Server; issuer: string };
  let browser: Browser;
  let context: BrowserContext;
  let events: () => any[];
  let origin: string;
  let loggedInAt = 0;
  /** The paths the agent's server received. */
  const seen: string[] = [];

  beforeAll(async () => {
    const edgePort = ctx.service.edgePort!;
    origin = `http://${HOST}:${edgePort}`;
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'oidc');
    provider = await startProvider(edgePort);
    upstream = createServer((request, response) => {
      request.resume();
      seen.push(request.url ?? '');
      response.writeHead(200, {
        'content-type': 'text/plain',
        'x-userinfo-refreshed': String(request.headers['x-userinfo-refreshed']),
      });
      response.end(
        `agent saw ${request.url} for ${request.headers['x-user-name']} <${request.headers['x-user-email']}>`,
      );
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    agent = await boundAgent(ctx, HOST, (upstream.address() as AddressInfo).port);
    const oidc = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${HOST}`,
      traffic_policy: `
on_http_request:
  - actions:
      - type: openid-connect
        config:
          issuer_url: ${provider.issuer}
          client_id: ${CLIENT_ID}
          client_secret: ${CLIENT_SECRET}
          scopes: [profile, email]
          max_session_duration: ${SESSION_S}s
          userinfo_refresh_interval: 1s
      - type: add-headers
        config:
          headers:
            x-user-name: "\${actions.ngrok.oidc.identity.name}"
            x-user-email: "\${actions.ngrok.oidc.identity.email}"
            x-userinfo-refreshed: "\${actions.ngrok.oidc.userinfo_refreshed}"
`,
    });
    expect(oidc.status).toBe(201);
    const jwt = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${API_HOST}`,
      traffic_policy: `
on_http_request:
  - actions:
      - type: jwt-validation
        config:
          issuer: {allow_list: [{value: "${provider.issuer}"}]}
          audience: {allow_list: [{value: "${API}"}]}
          http: {tokens: [{type: jwt, method: header, name: Authorization, prefix: "Bearer "}]}
          jws:
            allowed_algorithms: [RS256]
            keys: {sources: {additional_jkus: ["${provider.issuer}/jwks"]}}
      - type: custom-response
        config:
          status_code: 200
          body: "hello \${actions.ngrok.jwt_validation.tokens[0].payload.client_id}"
`,
    });
    expect(jwt.status).toBe(201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--no-first-run',
        `--host-resolver-rules=MAP *.${DOMAIN} 127.0.0.1`,
      ],
    });
    context = await browser.newContext();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await agent?.kill();
    upstream?.close();
    provider?.server.close();
  });

  it('sends a browser through the provider’s login and back to the agent, with a sealed session cookie', async () => {
    const page = await context.newPage();
    await page.goto(`${origin}/hello?x=1`, { waitUntil: 'commit' });
    // The edge sent the browser to the provider's login form.
    await page.waitForSelector('input[name=login]');
    expect(page.url().startsWith(`${provider.issuer}/interaction/`)).toBe(true);
    await page.fill('input[name=login]', 'ada');
    await page.fill('input[name=password]', 'any password');
    await page.click('button[type=submit]');
    await page.click('button:has-text("Continue")');
    await page.waitForURL(`${origin}/hello?x=1`);
    loggedInAt = Date.now();
    expect(await page.textContent('body')).toBe(
      'agent saw /hello?x=1 for Ada Lovelace <ada@example.com>',
    );
    const cookies = await context.cookies(origin);
    const session = cookies.find((c) => c.name === 'ngrok_session');
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe('Lax');
    // Sealed: neither the user nor a token reads in the cookie.
    expect(Buffer.from(session!.value, 'base64url').toString('latin1')).not.toMatch(/ada|eyJ/);
    const [redirected, answered] = await eventsOf(events, '/hello', 2);
    expect(redirected.http.response.status_code).toBe(302);
    expect(redirected.oauth).toEqual({
      decision: 'block',
      app_client_id: CLIENT_ID,
      user: { id: '', name: '' },
    });
    expect(answered.http.response.status_code).toBe(200);
    expect(answered.oauth).toEqual({
      decision: 'allow',
      app_client_id: CLIENT_ID,
      user: { id: 'ada', name: 'Ada Lovelace' },
    });
    const [callback] = await eventsOf(events, '/ngrok/callback');
    expect(callback.oauth.decision).toBe('allow');
    await page.close();
  }, 60_000);

  it('refuses a session cookie that was tampered with, and one from no browser at all', async () => {
    const session = (await context.cookies(origin)).find((c) => c.name === 'ngrok_session')!;
    const flipped = `${session.value.slice(0, 20)}${session.value[20] === 'A' ? 'B' : 'A'}${session.value.slice(21)}`;
    const answer = await curl(ctx.service.edgePort!, HOST, '/tampered', [
      '-H',
      `Cookie: ngrok_session=${flipped}`,
    ]);
    expect(answer.status).toBe(302);
    expect(answer.headers).toMatch(new RegExp(`location: ${provider.issuer}/auth\\?`, 'i'));
    const location = new URL(/location: (\S+)/i.exec(answer.headers)![1]);
    expect(location.searchParams.get('client_id')).toBe(CLIENT_ID);
    expect(location.searchParams.get('redirect_uri')).toBe(`http://${HOST}/ngrok/callback`);
    expect(location.searchParams.get('code_challenge_method')).toBe('S256');
    expect(location.searchParams.get('scope')).toBe('openid profile email');
  });

  it('ends the session after max_session_duration, even for a cookie replayed past its Max-Age', async () => {
    const session = (await context.cookies(origin)).find((c) => c.name === 'ngrok_session')!;
    // The cookie's Max-Age is what is left of the session: the browser drops it by itself.
    expect(session.expires * 1000).toBeLessThanOrEqual(loggedInAt + SESSION_S * 1000 + 1000);
    const until = (ms: number) =>
      new Promise((resolve) => setTimeout(resolve, Math.max(0, loggedInAt + ms - Date.now())));
    // Past userinfo_refresh_interval the edge reads the user again from the provider, and the
    // renewed session rides on the agent's answer.
    await until(1100);
    const refreshed = await curl(ctx.service.edgePort!, HOST, '/refresh', [
      '-H',
      `Cookie: ngrok_session=${session.value}`,
    ]);
    expect(refreshed.status).toBe(200);
    expect(refreshed.headers).toMatch(/x-userinfo-refreshed: true/i);
    expect(refreshed.headers).toMatch(
      /set-cookie: ngrok_session=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d/i,
    );
    await until(SESSION_S * 1000 + 100);
    const answer = await curl(ctx.service.edgePort!, HOST, '/later', [
      '-H',
      `Cookie: ngrok_session=${session.value}`,
    ]);
    expect(answer.status).toBe(302);
    expect(answer.headers).toMatch(new RegExp(`location: ${provider.issuer}/auth\\?`, 'i'));
    const [event] = await eventsOf(events, '/later');
    expect(event.oauth).toEqual({
      decision: 'block',
      app_client_id: CLIENT_ID,
      user: { id: '', name: '' },
    });
  }, 20_000);

  it('logs out at /ngrok/logout: the cookie is cleared and the upstream never sees the path', async () => {
    const page = await context.newPage();
    // The provider still knows the browser: the login completes without its form.
    await page.goto(`${origin}/again`, { waitUntil: 'commit' });
    await page.waitForURL(`${origin}/again`);
    expect(await page.textContent('body')).toContain('agent saw /again for Ada Lovelace');
    const session = (await context.cookies(origin)).find((c) => c.name === 'ngrok_session')!;
    const before = await curl(ctx.service.edgePort!, HOST, '/before-logout', [
      '-H',
      `Cookie: ngrok_session=${session.value}`,
    ]);
    expect(before.status).toBe(200);
    await page.goto(`${origin}/ngrok/logout`);
    expect(await page.textContent('body')).toBe('You are logged out.\n');
    expect((await context.cookies(origin)).some((c) => c.name === 'ngrok_session')).toBe(false);
    expect(seen).not.toContain('/ngrok/logout');
    // With redirect_path the browser goes on there: logged out, through the provider again.
    await page.goto(`${origin}/ngrok/logout?redirect_path=/bye`, { waitUntil: 'commit' });
    await page.waitForURL(`${origin}/bye`);
    expect(await page.textContent('body')).toContain('agent saw /bye for Ada Lovelace');
    const [bye] = await eventsOf(events, '/bye', 2);
    expect(bye.oauth.decision).toBe('block');
    await page.close();
  }, 30_000);

  it('jwt-validation lets a token the provider issued through, and says whose it is', async () => {
    const token = await clientToken(provider.issuer, API);
    const answer = await curl(ctx.service.edgePort!, API_HOST, '/data', [
      '-H',
      `Authorization: Bearer ${token}`,
    ]);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(`hello ${CLIENT_ID}`);
  });

  it('jwt-validation refuses a missing, tampered, expired or other-audience token with 401', async () => {
    const refused = async (header: string[], why: RegExp) => {
      const answer = await curl(ctx.service.edgePort!, API_HOST, '/data', header);
      expect(answer.status).toBe(401);
      expect(answer.headers).toMatch(/www-authenticate: Bearer error="invalid_token"/i);
      expect(answer.body).toMatch(why);
    };
    await refused([], /token is missing/);
    const token = await clientToken(provider.issuer, API);
    const [head, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, client_id: 'someone-else' })).toString(
      'base64url',
    );
    await refused(
      ['-H', `Authorization: Bearer ${head}.${forged}.${signature}`],
      /signature is not valid/,
    );
    const other = await clientToken(provider.issuer, 'urn:agent-ingress:other-api');
    await refused(['-H', `Authorization: Bearer ${other}`], /audience is not allowed/);
    const now = Math.floor(Date.now() / 1000);
    const expired = signedToken({ ...claims, iat: now - 600, exp: now - 300 });
    await refused(['-H', `Authorization: Bearer ${expired}`], /token expired/);
    // The same claims, freshly signed with the provider's key, pass: only the expiry refused it.
    const fresh = signedToken({ ...claims, exp: now + 300 });
    const answer = await curl(ctx.service.edgePort!, API_HOST, '/data', [
      '-H',
      `Authorization: Bearer ${fresh}`,
    ]);
    expect(answer.status).toBe(200);
  });
});
