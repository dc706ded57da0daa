import { createHash, randomBytes } from 'node:crypto';
import type { ActionRun } from '../action.ts';
import type { Exchange, PolicyServices } from '../exchange.ts';
import type { Template } from '../interpolate.ts';
import {
  authorizationUrl,
  checkedIdToken,
  newPendingLogin,
  type PendingLogin,
  type ResolvedProvider,
  redeemCode,
  type Tokens,
  userOf,
} from './provider-exchange.ts';
import type { User } from './providers.ts';
import { cookieSealer, requestCookies, setCookie } from './sealed-cookie.ts';

// The browser login that `openid-connect` and `oauth` share (ngrok's semantics are the same;
// only where the provider's endpoints come from differs). A request with a valid session cookie
// goes on; any other is sent to the provider, and comes back to CALLBACK_PATH on the endpoint
// itself, where the code becomes a session: a sealed cookie (sealed-cookie.ts) with the user and
// the provider's tokens, bounded by max_session_duration and idle_session_duration.
// /ngrok/login starts a login, /ngrok/logout ends the session: neither reaches the upstream.

export const LOGIN_PATH = '/ngrok/login';
export const LOGOUT_PATH = '/ngrok/logout';
export const CALLBACK_PATH = '/ngrok/callback';
/** How long a login under way may take between the redirect and the callback. */
const PENDING_MS = 10 * 60_000;
/** Where cookie keys are derived from SECRETS_KEY (see PolicyServices.cookieKeys). */
export const COOKIE_KEY_PURPOSE = 'traffic-policy-login-cookies';

/** One login action, compiled. */
export interface LoginSettings {
  /** `oidc` or `oauth`: the results land in `actions.ngrok.<result>`. */
  result: 'oidc' | 'oauth';
  authId: string;
  clientId: Template;
  clientSecret: Template;
  scopes: readonly string[];
  authzUrlParams: Record<string, string>;
  maxSessionMs: number;
  idleSessionMs?: number;
  /** How often the user is read again from the provider's userinfo endpoint. */
  userinfoRefreshMs?: number;
  allowCorsPreflight: boolean;
  cookieDomain?: string;
  /**
   * Identifies the provider: a session is valid only for the account, provider, client id and
   * scopes it was made with (so it may span one account's endpoints under auth_cookie_domain).
   */
  providerKey: string;
  resolve(services: PolicyServices): Promise<ResolvedProvider>;
}

/** The session cookie's sealed content. */
interface Session {
  sid: string;
  fp: string;
  user: User;
  tokens: Tokens;
  start: number;
  seen: number;
  /** When the user was last read from the provider. */
  checked: number;
}

interface Pending extends PendingLogin {
  fp: string;
  to: string;
  at: number;
}

/** The request's facts the flow reads. */
interface Visit {
  path: string;
  query: URLSearchParams;
  origin: string;
  secure: boolean;
  cookies: Map<string, string>;
  now: number;
}

function visitOf(x: Exchange): Visit {
  const url = x.values.req!.url as { scheme: string; path: string; query: string };
  const headers = x.request!.headers;
  const host = headers.host?.[0] ?? String(x.values.req!.host);
  return {
    path: url.path,
    query: new URLSearchParams(url.query),
    origin: `${url.scheme}://${host}`,
    secure: url.scheme === 'https',
    cookies: requestCookies(headers.cookie),
    now: x.services.now(),
  };
}

/** A path on this host the login may send the browser back to (never another origin). */
function localPath(value: string | null, fallback: string): string {
  const local = value?.startsWith('/') && !value.startsWith('//') && !value.includes('\\');
  return local ? value! : fallback;
}

/** The compiled action: one function per request. */
export function loginRun(settings: LoginSettings): ActionRun {
  const suffix = settings.authId === '' ? '' : `_${settings.authId}`;
  const names = { session: `ngrok_session${suffix}`, nonce: `ngrok_nonce${suffix}` };
  return async (x) => {
    const sealer = cookieSealer(x.services.cookieKeys);
    const visit = visitOf(x);
    const clientId = settings.clientId.render(x.values);
    const fp = createHash('sha256')
      .update(`${x.accountId}\n${settings.providerKey}\n${clientId}\n${settings.scopes.join(' ')}`)
      .digest('base64url')
      .slice(0, 16);
    const flow: Flow = { settings, names, sealer, visit, clientId, fp, x };
    const mine = (visit.query.get('auth_id') ?? settings.authId) === settings.authId;
    if (visit.path === CALLBACK_PATH) return othersLogin(flow) ? 'continue' : callback(flow);
    if (visit.path === LOGOUT_PATH && mine) return logout(flow);
    if (visit.path === LOGIN_PATH && mine)
      return startLogin(flow, localPath(visit.query.get('redirect_path'), '/'), true);
    const session = validSession(flow);
    if (session !== undefined) {
      const current = await refreshedUser(flow, session);
      if (current !== undefined) return allow(flow, current, current !== session);
    }
    if (settings.allowCorsPreflight && isPreflight(x)) return 'continue';
    const target = x.request!.target;
    return startLogin(flow, localPath(target, '/'), false);
  };
}

interface Flow {
  settings: LoginSettings;
  names: { session: string; nonce: string };
  sealer: ReturnType<typeof cookieSealer>;
  visit: Visit;
  clientId: string;
  fp: string;
  x: Exchange;
  /** Set when this request read the user again (userinfo_refresh_interval). */
  userinfoRefreshed?: boolean;
}

/** A callback for another login action of the policy (its nonce cookie, not ours). */
function othersLogin(f: Flow): boolean {
  if (f.visit.cookies.has(f.names.nonce)) return false;
  return [...f.visit.cookies.keys()].some((name) => name.startsWith('ngrok_nonce'));
}

function isPreflight(x: Exchange): boolean {
  const h = x.request!.headers;
  return (
    x.request!.method === 'OPTIONS' &&
    h.origin !== undefined &&
    h['access-control-request-method'] !== undefined
  );
}

const scopeOf = (f: Flow) => ({ secure: f.visit.secure, domain: f.settings.cookieDomain });

/** The session the request's cookie holds, when valid; records why one timed out. */
function validSession(f: Flow): Session | undefined {
  const raw = f.visit.cookies.get(f.names.session);
  if (raw === undefined) return undefined;
  const s = f.sealer.open(f.names.session, raw) as Session | undefined;
  if (s === undefined || s.fp !== f.fp) return undefined;
  const maxReached = f.visit.now - s.start >= f.settings.maxSessionMs;
  const idle =
    f.settings.idleSessionMs !== undefined && f.visit.now - s.seen >= f.settings.idleSessionMs;
  if (maxReached || idle) {
    f.x.values.actions.ngrok[f.settings.result] = {
      session_timed_out: idle,
      session_max_duration_reached: maxReached,
    };
    return undefined;
  }
  return s;
}

/**
 * The session with its user read again when userinfo_refresh_interval passed; undefined when
 * the provider no longer vouches for the user (the token was revoked, another subject): the
 * browser logs in again, as ngrok's continuous authorization has it.
 */
async function refreshedUser(f: Flow, s: Session): Promise<Session | undefined> {
  const every = f.settings.userinfoRefreshMs;
  if (every === undefined || f.visit.now - s.checked < every) return s;
  try {
    const provider = await f.settings.resolve(f.x.services);
    if (provider.userinfoUrl === undefined || s.tokens.access_token === undefined) {
      return { ...s, checked: f.visit.now };
    }
    const claims = provider.idToken === undefined ? {} : { sub: s.user.id };
    const user = await userOf(provider, s.tokens, claims, f.clientId);
    if (user.id !== s.user.id) return undefined;
    f.userinfoRefreshed = true;
    return { ...s, user, checked: f.visit.now };
  } catch {
    return undefined;
  }
}

/** Lets the request go on as the session's user; an idle bound is moved by a new cookie. */
function allow(f: Flow, s: Session, changed: boolean): 'continue' {
  if (changed || f.settings.idleSessionMs !== undefined) {
    f.x.setCookies.push(sessionCookie(f, { ...s, seen: f.visit.now }));
  }
  report(f, 'allow', s);
  return 'continue';
}

/** Browsers keep cookies of up to 4096 bytes; a session past it would be dropped silently. */
const MAX_COOKIE_VALUE = 3800;

/** The session's cookie; without the provider's tokens when they would not fit in one. */
function sessionCookie(f: Flow, s: Session): string {
  const left = (s.start + f.settings.maxSessionMs - f.visit.now) / 1000;
  let value = f.sealer.seal(f.names.session, s);
  if (value.length > MAX_COOKIE_VALUE) value = f.sealer.seal(f.names.session, { ...s, tokens: {} });
  return setCookie(f.names.session, value, scopeOf(f), left);
}

/** The decision for the event and the results for later rules. */
function report(f: Flow, decision: 'allow' | 'block', s?: Session, error?: string): void {
  const user = s?.user ?? { id: '', name: '', email: '' };
  f.x.decisions.oauth = { decision, appClientId: f.clientId, userId: user.id, userName: user.name };
  const previous = (f.x.values.actions.ngrok[f.settings.result] ?? {}) as Record<string, unknown>;
  f.x.values.actions.ngrok[f.settings.result] = {
    session_timed_out: false,
    session_max_duration_reached: false,
    ...previous,
    userinfo_refreshed: f.userinfoRefreshed === true,
    ...(s === undefined
      ? {}
      : {
          identity: {
            id: `idn_${createHash('sha256').update(`${f.settings.providerKey}\n${user.id}`).digest('hex').slice(0, 24)}`,
            email: user.email,
            name: user.name,
            provider_user_id: user.id,
            current_session_id: s.sid,
          },
          ...(f.settings.result === 'oidc' ? { identity_token: s.tokens.id_token ?? '' } : {}),
          access_token: s.tokens.access_token ?? '',
          refresh_token: s.tokens.refresh_token ?? '',
          expires_at: new Date(s.start + f.settings.maxSessionMs).toISOString(),
        }),
    ...(error === undefined ? {} : { error: { code: 'ERR_LOGIN_FAILED', message: error } }),
  };
}

/** Sends the browser to the provider, remembering where it was going (sealed nonce cookie). */
async function startLogin(f: Flow, to: string, force: boolean): Promise<'stop'> {
  report(f, 'block');
  const provider = await f.settings.resolve(f.x.services).catch((e: Error) => e);
  if (provider instanceof Error)
    return problem(f, 502, `The identity provider is not reachable: ${provider.message}`);
  const login = newPendingLogin();
  const pending: Pending = { ...login, fp: f.fp, to, at: f.visit.now };
  const extra = { ...f.settings.authzUrlParams, ...(force ? { prompt: 'login' } : {}) };
  const location = authorizationUrl(provider, login, {
    clientId: f.clientId,
    redirectUri: `${f.visit.origin}${CALLBACK_PATH}`,
    scopes: f.settings.scopes,
    extra,
  });
  f.x.setCookies.push(
    setCookie(f.names.nonce, f.sealer.seal(f.names.nonce, pending), scopeOf(f), PENDING_MS / 1000),
  );
  f.x.answer = {
    statusCode: 302,
    headers: { location: [location], 'cache-control': ['no-store'] },
    body: '',
  };
  return 'stop';
}

/** The provider sent the browser back: the code becomes a session, or the login failed. */
async function callback(f: Flow): Promise<'stop'> {
  const raw = f.visit.cookies.get(f.names.nonce);
  const pending =
    raw === undefined ? undefined : (f.sealer.open(f.names.nonce, raw) as Pending | undefined);
  const q = f.visit.query;
  report(f, 'block');
  if (
    pending === undefined ||
    pending.fp !== f.fp ||
    f.visit.now - pending.at > PENDING_MS ||
    q.get('state') !== pending.state
  ) {
    return problem(f, 400, 'This login is not the one under way here, or it took too long.');
  }
  f.x.setCookies.push(setCookie(f.names.nonce, '', scopeOf(f), 0));
  const error = q.get('error');
  if (error !== null)
    return problem(
      f,
      401,
      `The identity provider refused the login: ${error} ${q.get('error_description') ?? ''}`.trim(),
    );
  try {
    const session = await newSession(f, pending, q.get('code') ?? '');
    f.x.setCookies.push(sessionCookie(f, session));
    report(f, 'allow', session);
    f.x.answer = {
      statusCode: 302,
      headers: { location: [pending.to], 'cache-control': ['no-store'] },
      body: '',
    };
  } catch (e) {
    return problem(f, 401, `The login failed: ${(e as Error).message}`);
  }
  return 'stop';
}

async function newSession(f: Flow, pending: Pending, code: string): Promise<Session> {
  const provider = await f.settings.resolve(f.x.services);
  const tokens = await redeemCode(provider, pending, {
    code,
    clientId: f.clientId,
    clientSecret: f.settings.clientSecret.render(f.x.values),
    redirectUri: `${f.visit.origin}${CALLBACK_PATH}`,
  });
  const claims =
    provider.idToken === undefined
      ? {}
      : await checkedIdToken(f.x.services, provider, tokens.id_token, {
          clientId: f.clientId,
          nonce: pending.nonce,
        });
  const user = await userOf(provider, tokens, claims, f.clientId);
  if (user.id === '') throw new Error('the provider did not say who logged in');
  const sid = randomBytes(16).toString('base64url');
  return {
    sid,
    fp: f.fp,
    user,
    tokens,
    start: f.visit.now,
    seen: f.visit.now,
    checked: f.visit.now,
  };
}

/** Ends the session: its cookie is cleared; the browser goes to redirect_path, or is told so. */
function logout(f: Flow): 'stop' {
  f.x.setCookies.push(setCookie(f.names.session, '', scopeOf(f), 0));
  report(f, 'block');
  const to = f.visit.query.get('redirect_path');
  f.x.answer =
    to === null
      ? {
          statusCode: 200,
          headers: { 'content-type': ['text/plain; charset=utf-8'], 'cache-control': ['no-store'] },
          body: 'You are logged out.\n',
        }
      : {
          statusCode: 302,
          headers: { location: [localPath(to, '/')], 'cache-control': ['no-store'] },
          body: '',
        };
  return 'stop';
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** An error page that offers to log in again (ngrok's behaviour on a failed login). */
function problem(f: Flow, statusCode: number, message: string): 'stop' {
  report(f, 'block', undefined, message);
  const again = `${LOGIN_PATH}${f.settings.authId === '' ? '' : `?auth_id=${encodeURIComponent(f.settings.authId)}`}`;
  f.x.answer = {
    statusCode,
    headers: { 'content-type': ['text/html; charset=utf-8'], 'cache-control': ['no-store'] },
    body: `<!doctype html><title>Login failed</title><p>${escapeHtml(message)}</p><p><a href="${again}">Log in again</a></p>\n`,
  };
  return 'stop';
}
