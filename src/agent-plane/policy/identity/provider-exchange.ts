import { createHash, randomBytes } from 'node:crypto';
import type { PolicyServices } from '../exchange.ts';
import { signingKeys } from './json-documents.ts';
import { claimsProblem, decodeJwt, JWS_ALGORITHMS, signedBy } from './jwt.ts';
import type { ProviderEndpoints, User } from './providers.ts';

// The login's talk with the provider (RFC 6749 §4.1 with PKCE, RFC 7636; OpenID Connect Core
// §3.1): the authorization URL the browser is sent to, then, on the way back, the code traded
// for tokens, the ID token checked (signature from the provider's JWKS, issuer, audience, nonce,
// expiry) and the user read from the userinfo endpoint.

/** A provider resolved for one login: its endpoints and, for OpenID providers, the ID token's. */
export interface ResolvedProvider extends ProviderEndpoints {
  idToken?: { issuer: string; jwksUri: string };
}

/** What a login under way remembers between the redirect and the callback. */
export interface PendingLogin {
  state: string;
  nonce: string;
  verifier: string;
}

/** The tokens the provider answered with. */
export interface Tokens {
  access_token?: string;
  id_token?: string;
  refresh_token?: string;
}

const TIMEOUT_MS = 10_000;
const CLOCK_SKEW_MS = 60_000;

/** Fresh random state, nonce and PKCE verifier (each 256 bits). */
export function newPendingLogin(): PendingLogin {
  const random = () => randomBytes(32).toString('base64url');
  return { state: random(), nonce: random(), verifier: random() };
}

/** Where the browser is sent to log in. */
export function authorizationUrl(
  provider: ResolvedProvider,
  login: PendingLogin,
  params: {
    clientId: string;
    redirectUri: string;
    scopes: readonly string[];
    extra: Record<string, string>;
  },
): string {
  const url = new URL(provider.authorizationUrl);
  const scopes = [...new Set([...provider.scopes, ...params.scopes])];
  const query: Record<string, string> = {
    ...params.extra,
    response_type: 'code',
    client_id: params.clientId,
    redirect_uri: params.redirectUri,
    scope: scopes.join(' '),
    state: login.state,
  };
  if (provider.idToken !== undefined) query.nonce = login.nonce;
  if (provider.pkce) {
    query.code_challenge = createHash('sha256').update(login.verifier).digest('base64url');
    query.code_challenge_method = 'S256';
  }
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  return url.toString();
}

async function jsonAnswer(response: Response, what: string): Promise<Record<string, unknown>> {
  const body = (await response.json().catch(() => undefined)) as
    | Record<string, unknown>
    | undefined;
  if (!response.ok || typeof body !== 'object' || body === null) {
    const why = typeof body?.error === 'string' ? `: ${body.error}` : '';
    throw new Error(`the provider's ${what} answered ${response.status}${why}`);
  }
  return body;
}

/** Trades the authorization code for tokens at the token endpoint. */
export async function redeemCode(
  provider: ResolvedProvider,
  login: PendingLogin,
  params: { code: string; clientId: string; clientSecret: string; redirectUri: string },
): Promise<Tokens> {
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code: params.code,
    redirect_uri: params.redirectUri,
  });
  if (provider.pkce) form.set('code_verifier', login.verifier);
  const headers: Record<string, string> = {
    accept: 'application/json',
    'content-type': 'application/x-www-form-urlencoded',
  };
  if (provider.clientAuth === 'client_secret_basic') {
    const pair = `${encodeURIComponent(params.clientId)}:${encodeURIComponent(params.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
  } else {
    form.set('client_id', params.clientId);
    form.set('client_secret', params.clientSecret);
  }
  const response = await fetch(provider.tokenUrl, {
    method: 'POST',
    headers,
    body: form,
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const answer = await jsonAnswer(response, 'token endpoint');
  const pick = (k: string) => (typeof answer[k] === 'string' ? (answer[k] as string) : undefined);
  return {
    access_token: pick('access_token'),
    id_token: pick('id_token'),
    refresh_token: pick('refresh_token'),
  };
}

/** The ID token's claims once its signature, issuer, audience, nonce and expiry hold. */
export async function checkedIdToken(
  services: PolicyServices,
  provider: ResolvedProvider,
  token: string | undefined,
  expect: { clientId: string; nonce: string },
): Promise<Record<string, unknown>> {
  const { issuer, jwksUri } = provider.idToken!;
  const jwt = token === undefined ? undefined : decodeJwt(token);
  if (jwt === undefined) throw new Error('the provider sent no ID token');
  const alg = String(jwt.header.alg);
  if (!(JWS_ALGORITHMS as readonly string[]).includes(alg)) {
    throw new Error(`the ID token is signed with ${alg}, which is not accepted`);
  }
  const kid = typeof jwt.header.kid === 'string' ? jwt.header.kid : undefined;
  const keys = await signingKeys(services, jwksUri, kid, alg);
  if (!keys.some((key) => signedBy(jwt, key, alg)))
    throw new Error('the ID token signature is not valid');
  const problem = claimsProblem(jwt.payload, {
    issuers: [issuer],
    audiences: [expect.clientId],
    nowMs: services.now(),
    skewMs: CLOCK_SKEW_MS,
  });
  if (problem !== undefined) throw new Error(`ID token: ${problem}`);
  if (jwt.payload.nonce !== expect.nonce) throw new Error('the ID token nonce does not match');
  return jwt.payload;
}

/** The user: the ID token's claims, completed by the userinfo endpoint when there is one. */
export async function userOf(
  provider: ResolvedProvider,
  tokens: Tokens,
  claims: Record<string, unknown>,
  clientId: string,
): Promise<User> {
  if (provider.userinfoUrl === undefined || tokens.access_token === undefined) {
    return provider.userOf(claims);
  }
  const response = await fetch(provider.userinfoUrl, {
    headers: {
      accept: 'application/json',
      authorization: `Bearer ${tokens.access_token}`,
      ...(provider.userinfoHeaders?.(clientId) ?? {}),
    },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const info = await jsonAnswer(response, 'userinfo endpoint');
  // OpenID Connect Core §5.3.2: a userinfo answer about another subject is refused.
  if (claims.sub !== undefined && info.sub !== undefined && info.sub !== claims.sub) {
    throw new Error('the userinfo subject differs from the ID token subject');
  }
  return provider.userOf({ ...claims, ...info });
}
