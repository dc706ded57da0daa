import {
  type CelEnvironment,
  celEnvironment,
  type VariableKind,
  type VariableLeaf,
} from '../../data-plane/filter/index.ts';
import { registerMacros } from './macros.ts';

// The variables a policy's expressions and `${…}` read, with ngrok's names and types
// (ngrok docs: traffic-policy/variables). Each request or connection fills a JSON object of this
// shape (exchange.ts); the CEL environment is the one subscription filters use, declared from
// these leaves instead of the catalogue's.

const LEAVES: Record<string, VariableKind> = {
  'conn.bytes_in': 'int64',
  'conn.bytes_out': 'int64',
  'conn.client_ip': 'string',
  'conn.client_port': 'int32',
  'conn.server_ip': 'string',
  'conn.server_port': 'int32',
  'conn.server_region': 'string',
  'conn.ts.start': 'timestamp',
  'conn.tls.version': 'string',
  'conn.tls.cipher_suite': 'string',
  'endpoint.addr': 'string',
  'endpoint.host': 'string',
  'endpoint.id': 'string',
  'endpoint.port': 'int32',
  'endpoint.protocol': 'string',
  'endpoint.url': 'string',
  'req.content_encoding': 'string_list',
  'req.content_length': 'int64',
  'req.content_type.parameters': 'string_map',
  'req.content_type.raw': 'string',
  'req.headers': 'string_list_map',
  'req.host': 'string',
  'req.location': 'string',
  'req.method': 'string',
  'req.ts.header_received': 'timestamp',
  'req.url.authority': 'string',
  'req.url.host': 'string',
  'req.url.path': 'string',
  'req.url.port': 'int32',
  'req.url.query': 'string',
  'req.url.query_params': 'string_list_map',
  'req.url.raw': 'string',
  'req.url.raw_path': 'string',
  'req.url.scheme': 'string',
  'req.url.uri': 'string',
  'req.url.user_password': 'string',
  'req.user_agent.name': 'string',
  'req.user_agent.version': 'string',
  'req.user_agent.os': 'string',
  'req.user_agent.is_bot': 'bool',
  'req.user_agent.is_mobile': 'bool',
  'req.user_agent.is_tablet': 'bool',
  'req.user_agent.is_desktop': 'bool',
  'req.version': 'string',
  'res.content_encoding': 'string_list',
  'res.content_length': 'int64',
  'res.content_type.parameters': 'string_map',
  'res.content_type.raw': 'string',
  'res.headers': 'string_list_map',
  'res.location': 'string',
  'res.status_code': 'int32',
  'time.now': 'string',
  // Results of the actions that ran (`actions.ngrok.basic_auth.credentials.presented`) and
  // set-vars' values: their shapes depend on the action, so they are dynamic.
  actions: 'dyn',
  vars: 'dyn',
};

/** Groups that are also strings, as ngrok has them (`req.url` is the URL; `req.url.path` a part). */
export const STRING_GROUPS = [
  'req.url',
  'req.user_agent',
  'req.content_type',
  'res.content_type',
] as const;

/** ngrok variables this service cannot fill truthfully: refused with why, never left empty. */
const UNAVAILABLE: Readonly<Record<string, string>> = {
  'conn.geo': 'this service has no GeoIP database',
  'conn.client_ip.categories': 'this service has no IP intelligence data',
  'conn.client_ip.is_on_blocklist': 'this service has no IP intelligence data',
  'conn.k8s': 'this service runs no Kubernetes operator',
  'req.cookies': 'cookies are read with getReqCookie(name) only',
  'res.cookies': 'cookies are read with getResCookie(name) only',
  'req.trailers': 'trailers are not read by the edge',
  'res.trailers': 'trailers are not read by the edge',
  'req.body': 'the edge streams bodies and does not buffer them',
  'res.body': 'the edge streams bodies and does not buffer them',
  'conn.tls.client': 'the edge does not ask for client certificates',
  'conn.client_ip.geo': 'this service has no GeoIP database',
  'conn.client_ip.as': 'this service has no AS (network owner) data',
  'req.user_agent.os_version': 'the User-Agent is read for its browser, OS and device class only',
  'req.user_agent.device': 'the User-Agent is read for its browser, OS and device class only',
  'req.user_agent.url': 'the User-Agent is read for its browser, OS and device class only',
};

/** ngrok's macro namespaces this service does not provide (CEL sees them as unknown names). */
const MACRO_NAMESPACES: Readonly<Record<string, string>> = {
  rand: 'a policy decides the same way for the same request',
  secrets: 'there are no secret vaults: write the value into the policy',
};

/**
 * The first reference in `expression` to a part of a string variable that ngrok has and this
 * service does not (`conn.client_ip.categories`): CEL's type check only says it "cannot index"
 * the string, so the compiler asks this for the reason.
 */
export function unavailableMember(expression: string): string | undefined {
  // The longest dotted name that is not followed by a call (`.contains(…)` is a method).
  for (const m of expression.matchAll(/\bconn\.client_ip(?:\.[A-Za-z_]+)+(?![A-Za-z_(])/g)) {
    const why = unavailable(m[0]);
    if (why !== undefined) return why;
  }
  return undefined;
}

/** The declared leaves, dotted. */
export const POLICY_LEAVES: readonly VariableLeaf[] = Object.entries(LEAVES).map(
  ([name, kind]) => ({ name, path: name.split('.'), kind }),
);

function unavailable(name: string): string | undefined {
  const namespace = name.split('.')[0];
  if (Object.hasOwn(MACRO_NAMESPACES, namespace)) {
    return `'${namespace}.*' are ngrok macros this service does not provide (${MACRO_NAMESPACES[namespace]})`;
  }
  for (const [prefix, why] of Object.entries(UNAVAILABLE)) {
    if (name === prefix || name.startsWith(`${prefix}.`)) {
      return `'${name}' is an ngrok variable this service does not provide (${why})`;
    }
  }
  return undefined;
}

/** Which traffic an expression runs on: HTTP endpoints', or a TCP endpoint's connections. */
export type PolicyScope = 'http' | 'tcp';

/** What a TCP endpoint's connections do not have, and why (its variables are the rest). */
const NOT_ON_TCP: Readonly<Record<string, string>> = {
  req: 'its connections carry no HTTP request',
  res: 'its connections carry no HTTP response',
  'conn.tls': 'the edge passes its bytes through without TLS',
};

function notOnTcp(name: string): string | undefined {
  return Object.keys(NOT_ON_TCP).find((p) => name === p || name.startsWith(`${p}.`));
}

function tcpUnavailable(name: string): string | undefined {
  const prefix = notOnTcp(name);
  if (prefix !== undefined) {
    return `'${name}' is not available on a TCP endpoint: ${NOT_ON_TCP[prefix]}`;
  }
  return unavailable(name);
}

const environments = new Map<PolicyScope, CelEnvironment>();

/** The (cached) CEL environment of policy expressions in `scope`; built once, on first use. */
export function policyEnvironment(scope: PolicyScope = 'http'): CelEnvironment {
  let environment = environments.get(scope);
  if (environment === undefined) {
    const http = scope === 'http';
    environment = celEnvironment({
      label: 'traffic_policy',
      leaves: http ? POLICY_LEAVES : POLICY_LEAVES.filter((l) => notOnTcp(l.name) === undefined),
      stringGroups: http ? STRING_GROUPS : [],
      functions: registerMacros,
      unreadable: http ? unavailable : tcpUnavailable,
    });
    environments.set(scope, environment);
  }
  return environment;
}
