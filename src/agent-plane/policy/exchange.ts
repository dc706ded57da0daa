import type { Phase } from './document.ts';

// What a policy reads and changes while it runs on one connection or request: the variables
// (variables.ts's shape, as JSON), the request and response as the edge will send them, a
// terminating answer, and the decisions the traffic event reports. The edge builds one per
// request (and one per TCP connection) and reads it back after each phase.

/** The modules' decisions, as http_request_complete.v0 / tcp_connection_closed.v0 name them. */
export interface Decisions {
  basicAuth: { decision: string; username: string };
  oauth: { decision: string; appClientId: string; userId: string; userName: string };
  ipPolicy: string;
  circuitBreaker: string;
  compression: { algorithm: string; bytesSaved: number };
  webhookVerification: string;
  /** The metadata of each log action that ran, in order. */
  logs: Record<string, unknown>[];
}

/** A module that did not run says `invalid` (SPEC.md). */
export function noDecisions(): Decisions {
  return {
    basicAuth: { decision: 'invalid', username: '' },
    oauth: { decision: 'invalid', appClientId: '', userId: '', userName: '' },
    ipPolicy: 'invalid',
    circuitBreaker: 'invalid',
    compression: { algorithm: 'none', bytesSaved: 0 },
    webhookVerification: 'invalid',
    logs: [],
  };
}

/** Header fields by lower-case name. */
export type HeaderMap = Record<string, string[]>;

/** An answer the policy gives instead of the upstream's (custom-response, deny, redirect, …). */
export interface Answer {
  statusCode: number;
  headers: HeaderMap;
  body: string | Buffer;
}

/** The JSON the expressions read (variables.ts declares its shape). */
export interface PolicyValues {
  conn: Record<string, unknown>;
  endpoint: Record<string, unknown>;
  req?: Record<string, unknown> & { headers: HeaderMap };
  res?: Record<string, unknown> & { headers: HeaderMap };
  time: { now: string };
  actions: { ngrok: Record<string, unknown> };
  vars: Record<string, unknown>;
}

/** What runs a policy needs from the service (per process, no store access per request). */
export interface PolicyServices {
  /** The allow and deny rules of the account's IP policies, by id (unknown ids: absent). */
  ipPolicyRules(
    accountId: string,
    ids: readonly string[],
  ): Promise<Map<string, { cidr: string; action: 'allow' | 'deny' }[]>>;
  /** Counters shared by the rate-limit and circuit-breaker actions of this process. */
  readonly state: Map<string, unknown>;
  /** Fetches JSON (JWKS, OpenID discovery) with a bounded time; cached by the caller. */
  fetchJson(url: string): Promise<unknown>;
  /** Keys sealing the login actions' cookies, derived from SECRETS_KEY (current first). */
  readonly cookieKeys: readonly Buffer[];
  now(): number;
}

/** One connection's or request's run of a policy. */
export interface Exchange {
  readonly accountId: string;
  /** The endpoint whose policy runs (its id keys rate limits and breakers). */
  readonly endpointId: string;
  phase: Phase;
  readonly values: PolicyValues;
  readonly services: PolicyServices;
  readonly decisions: Decisions;
  /** The request as it will go upstream: url-rewrite and the header actions change it. */
  request?: { method: string; target: string; headers: HeaderMap };
  /** The upstream's answer head, in on_http_response. */
  response?: { statusCode: number; headers: HeaderMap };
  /** Set by a terminating action that answers. */
  answer?: Answer;
  /** Set by close-connection and by deny in on_tcp_connect. */
  close?: boolean;
  /** Set by forward-internal: the internal endpoint it forwards to (online when it ran). */
  forward?: { url: string; hostname: string };
  /**
   * Whether the account's internal endpoint `hostname` is online, as the edge knows it; absent
   * where forward-internal cannot forward (an internal endpoint's own policy: no second hop).
   */
  internalOnline?: (hostname: string) => boolean;
  /** Set by compress-response: the algorithms it may use, preferred first. */
  compress?: readonly string[];
  /** Work after the response (a circuit breaker counting the outcome). */
  readonly afterResponse: ((statusCode: number) => void)[];
  /** The cookies to set on whatever answer goes back (an OIDC session). */
  readonly setCookies: string[];
  /**
   * The request's body, read whole (up to a bound) and kept for the upstream; absent where the
   * edge cannot buffer one (then actions that need it refuse the request).
   */
  readBody?: () => Promise<Buffer | undefined>;
}

/** `basic-auth` → `basic_auth`, once per action type. */
const RESULT_NAMES = new Map<string, string>();

/** Records an action's result as `actions.ngrok.<type with underscores>`. */
export function setResult(x: Exchange, type: string, result: Record<string, unknown>): void {
  let name = RESULT_NAMES.get(type);
  if (name === undefined) {
    name = type.replaceAll('-', '_');
    RESULT_NAMES.set(type, name);
  }
  x.values.actions.ngrok[name] = result;
}

/** A new exchange for a connection or request whose variables are `values`. */
export function createExchange(init: {
  accountId: string;
  endpointId: string;
  values: PolicyValues;
  services: PolicyServices;
  request?: Exchange['request'];
}): Exchange {
  return {
    accountId: init.accountId,
    endpointId: init.endpointId,
    phase: init.request === undefined ? 'on_tcp_connect' : 'on_http_request',
    values: init.values,
    services: init.services,
    decisions: noDecisions(),
    request: init.request,
    afterResponse: [],
    setCookies: [],
  };
}

/** Adds a value to a header field (or any map of lists). */
export function appendValue(map: Record<string, string[]>, name: string, value: string): void {
  const values = map[name];
  if (values === undefined) map[name] = [value];
  else values.push(value);
}
