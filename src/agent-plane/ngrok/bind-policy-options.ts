import {
  ACTIONS,
  type CompiledPolicy,
  compilePolicy,
  PHASES,
  PolicyError,
} from '../policy/index.ts';
import { NgrokRefusal } from './messages.ts';

// An ngrok agent endpoint's Traffic Policy, from its Bind: the `TrafficPolicy` option (the SDK's
// `traffic_policy`, YAML or JSON, compiled like a cloud endpoint's) after ngrok's older module
// options as the actions they are now (BasicAuth → basic-auth, IPRestriction → restrict-ips, …),
// as ngrok prepends them. Options the service does not apply are refused by name, never ignored.

type Opts = Record<string, unknown>;
type Phase = (typeof PHASES)[number];
/** A rule of a policy document, as the compiler reads it. */
type Rule = { name: string; expressions?: string[]; actions: { type: string; config?: object }[] };
/** The rules one module option stands for, by phase. */
type ModuleRules = Partial<Record<Phase, Rule[]>>;

/** HTTP endpoint options and the value that means "not used" (anything else is a use). */
const HTTP_OPTIONS_UNUSED: Record<string, unknown> = {
  Auth: '',
  Subdomain: '',
  HostHeaderRewrite: false,
  ProxyProto: 0,
};
/** Options ngrok sends as null when unused, and that this server does not apply. */
const REFUSED_OPTIONS = ['MutualTLSCA', 'WebsocketTCPConverter'];
/** Options read by the bind itself. */
const READ_OPTIONS = new Set(['Domain', 'Hostname', 'URL', 'Addr', 'LocalUrlScheme']);

/**
 * A module option's field, whatever the agent's spelling: ngrok's Rust SDKs send snake_case
 * (`allow_cidrs`), its Go agent the Go names (`AllowCIDRs`); ngrok reads both, like Go's JSON.
 */
function get(value: Opts, name: string): unknown {
  if (typeof value !== 'object' || value === null) return undefined;
  const wanted = name.toLowerCase().replaceAll('_', '');
  const key = Object.keys(value).find((k) => k.toLowerCase().replaceAll('_', '') === wanted);
  return key === undefined ? undefined : value[key];
}

/** A module option's text as is: `${` would be CEL interpolation in the action it becomes. */
function plain(option: string, text: string): string {
  if (text.includes('${')) throw new NgrokRefusal(`${option}: "\${" cannot be used in its values`);
  return text;
}

const list = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
const rule = (name: string, type: string, config?: object, expressions?: string[]): Rule => ({
  name,
  ...(expressions && { expressions }),
  actions: [{ type, ...(config && { config }) }],
});

/** `Add: ["Name:value"]` and `Remove: [names]` of ngrok's header options, as actions. */
function headerRules(name: string, value: Opts): Rule[] {
  const added: Record<string, string> = {};
  for (const [i, field] of list(get(value, 'add')).entries()) {
    const at = field.indexOf(':');
    // Not quoted: a header's value may be a secret.
    if (at <= 0) throw new NgrokRefusal(`${name}: add[${i}] is not "Name:value"`);
    added[field.slice(0, at).trim()] = plain(name, field.slice(at + 1).trim());
  }
  const removed = list(get(value, 'remove'));
  return [
    ...(removed.length > 0 ? [rule(name, 'remove-headers', { headers: removed })] : []),
    ...(Object.keys(added).length > 0 ? [rule(name, 'add-headers', { headers: added })] : []),
  ];
}

/** `Credentials: [{Username, CleartextPassword}]` as basic-auth's `user:password` list. */
function basicAuthRules(value: Opts): ModuleRules {
  const credentials = ([get(value, 'credentials') ?? []].flat() as Opts[]).map((c: Opts) => {
    const hashed = get(c, 'hashed_password');
    if (typeof hashed === 'string' && hashed !== '') {
      throw new NgrokRefusal('BasicAuth: hashed passwords are not supported: send the password');
    }
    return plain(
      'BasicAuth',
      `${String(get(c, 'username') ?? '')}:${String(get(c, 'cleartext_password') ?? '')}`,
    );
  });
  return { on_http_request: [rule('BasicAuth', 'basic-auth', { credentials })] };
}

/** A CEL literal of a string or a list of strings (JSON's escapes are CEL's). */
const literal = (value: string | string[]) => JSON.stringify(value);

/** Allow and deny regexes on the User-Agent: an allowed match wins, as ngrok's module. */
function userAgentRules(value: Opts): ModuleRules {
  const matches = (res: string[]) =>
    res.map((re) => `getReqHeader("user-agent").exists(u, u.matches(${literal(re)}))`).join(' || ');
  const allow = list(get(value, 'allow'));
  const deny = list(get(value, 'deny'));
  const allowed = allow.length > 0 ? `(${matches(allow)})` : 'false';
  const denied = deny.length > 0 ? `(${matches(deny)})` : allow.length > 0 ? 'true' : 'false';
  return {
    on_http_request: [
      rule('UserAgentFilter', 'deny', { status_code: 403 }, [`!${allowed} && ${denied}`]),
    ],
  };
}

/** Each module option ngrok's agents send, as the rules ngrok now runs for it. */
const MODULES: Record<string, (value: Opts) => ModuleRules> = {
  IPRestriction: (v) => ({
    on_http_request: [
      rule('IPRestriction', 'restrict-ips', {
        allow: list(get(v, 'allow_cidrs')),
        deny: list(get(v, 'deny_cidrs')),
      }),
    ],
  }),
  UserAgentFilter: userAgentRules,
  CircuitBreaker: (v) => ({
    on_http_request: [
      rule('CircuitBreaker', 'circuit-breaker', {
        error_threshold: Number(get(v, 'error_threshold') ?? 0),
      }),
    ],
  }),
  BasicAuth: basicAuthRules,
  OAuth: (v) => loginRules('OAuth', v),
  OIDC: (v) => loginRules('OIDC', v),
  WebhookVerification: (v) => ({
    on_http_request: [
      rule('WebhookVerification', 'verify-webhook', {
        provider: String(get(v, 'provider') ?? '').toLowerCase(),
        secret: plain('WebhookVerification', String(get(v, 'secret') ?? '')),
      }),
    ],
  }),
  RequestHeaders: (v) => ({ on_http_request: headerRules('RequestHeaders', v) }),
  ResponseHeaders: (v) => ({ on_http_response: headerRules('ResponseHeaders', v) }),
  Compression: () => ({ on_http_response: [rule('Compression', 'compress-response')] }),
};

/**
 * OAuth and OIDC as ngrok's `oauth` and `openid-connect` actions, their allow lists a deny rule
 * after the login (403 unless the user's email is listed or under a listed domain).
 */
function loginRules(option: 'OAuth' | 'OIDC', value: Opts): ModuleRules {
  const [type, result] = option === 'OAuth' ? ['oauth', 'oauth'] : ['openid-connect', 'oidc'];
  if (!ACTIONS.has(type)) {
    throw new NgrokRefusal(`this server does not apply the endpoint option ${option}: remove it`);
  }
  if (String(get(value, 'sealed_client_secret') ?? '') !== '') {
    throw new NgrokRefusal(`${option}: a sealed client secret is ngrok's: send the secret`);
  }
  const scopes = list(get(value, 'scopes'));
  const config = {
    ...(option === 'OAuth'
      ? { provider: String(get(value, 'provider') ?? '') }
      : { issuer_url: String(get(value, 'issuer_url') ?? '') }),
    ...(get(value, 'client_id') ? { client_id: String(get(value, 'client_id')) } : {}),
    ...(get(value, 'client_secret') ? { client_secret: String(get(value, 'client_secret')) } : {}),
    ...(scopes.length > 0 ? { scopes } : {}),
  };
  const rules = [rule(option, type, config)];
  const emails = list(get(value, 'allow_emails'));
  const domains = list(get(value, 'allow_domains'));
  if (emails.length + domains.length > 0) {
    const email = `actions.ngrok.${result}.identity.email`;
    const listed = `${email} in ${literal(emails)} || ${literal(domains)}.exists(d, ${email}.endsWith("@" + d))`;
    rules.push(rule(`${option} allow list`, 'deny', { status_code: 403 }, [`!(${listed})`]));
  }
  return { on_http_request: rules };
}

/** The options `opts` uses that this server does not apply (a module option is applied). */
export function unsupportedOptions(opts: Opts): string[] {
  return Object.entries(opts)
    .filter(([key, value]) => {
      if (READ_OPTIONS.has(key) || key in MODULES || key === 'TrafficPolicy') return false;
      if (value === null || value === undefined) return false;
      if (key in HTTP_OPTIONS_UNUSED) return value !== HTTP_OPTIONS_UNUSED[key];
      if (REFUSED_OPTIONS.includes(key)) return true;
      // Unknown keys: refused unless empty (a newer agent's field it left unset).
      return value !== '' && value !== false && value !== 0;
    })
    .map(([key]) => key);
}

/** Compiles a document, a refusal naming `what` and where it is wrong. */
function compiled(text: string, what: string): CompiledPolicy {
  try {
    return compilePolicy(text);
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    throw new NgrokRefusal(`invalid ${what}: ${error.message}`);
  }
}

/** Two policies as one: `first`'s rules before `then`'s in each phase. */
function joined(first: CompiledPolicy, then: CompiledPolicy): CompiledPolicy {
  const phases = {} as Record<Phase, CompiledPolicy['phases'][Phase]>;
  for (const phase of PHASES) phases[phase] = [...first.phases[phase], ...then.phases[phase]];
  const types = new Set([...first.types, ...then.types]);
  return Object.freeze({ text: `${first.text}\n${then.text}`, phases, types });
}

/** Refuses the options not applied (on TCP and TLS endpoints: every policy option). */
function refuseUnsupported(opts: Opts, proto: string, modules: string[]): void {
  const unsupported = unsupportedOptions(opts);
  const http = proto === 'http' || proto === 'https';
  if (!http) {
    const text = opts.TrafficPolicy;
    unsupported.push(...modules, ...(text != null && text !== '' ? ['TrafficPolicy'] : []));
  }
  if (unsupported.length === 0) return;
  const many = unsupported.length > 1;
  throw new NgrokRefusal(
    `this server does not apply the endpoint option${many ? 's' : ''} ${unsupported.join(', ')}${http ? '' : ` on ${proto} endpoints`}: remove ${many ? 'them' : 'it'} from the listener`,
  );
}

/** The module options' rules as one document, in MODULES' order. */
function moduleDocument(opts: Opts, modules: string[]): string {
  const document: Partial<Record<Phase, Rule[]>> = {};
  for (const key of modules) {
    for (const [phase, rules] of Object.entries(MODULES[key](opts[key] as Opts))) {
      document[phase as Phase] = [...(document[phase as Phase] ?? []), ...rules];
    }
  }
  return JSON.stringify(document);
}

/**
 * The policy an HTTP(S) Bind asks for (module options first, then TrafficPolicy), undefined when
 * none; an NgrokRefusal for an option not applied or a policy that does not compile.
 */
export function bindPolicy(opts: Opts, proto: string): CompiledPolicy | undefined {
  const modules = Object.keys(MODULES).filter((key) => opts[key] != null);
  refuseUnsupported(opts, proto, modules);
  const text = opts.TrafficPolicy;
  if (typeof text === 'object' && text !== null) {
    throw new NgrokRefusal('TrafficPolicy: send the policy as a YAML or JSON string');
  }
  const options =
    modules.length > 0 ? compiled(moduleDocument(opts, modules), modules.join(', ')) : undefined;
  const own =
    typeof text === 'string' && text.trim() !== '' ? compiled(text, 'traffic_policy') : undefined;
  if (options === undefined || own === undefined) return options ?? own;
  return joined(options, own);
}
