import type { Keyring } from '../../shared/secrets.ts';
import { objectsOfKind } from '../../store/account-objects.ts';
import type { Queryable } from '../../store/db.ts';
import { type CompiledPolicy, compilePolicy, type EndpointProtocol } from './compile.ts';
import type { PolicyServices } from './exchange.ts';
import { COOKIE_KEY_PURPOSE } from './identity/login-flow.ts';

// The cloud endpoints the edge runs policies for, found by hostname (a TCP endpoint by its
// reserved address, `host:port`): read from the store once per
// name and kept for `ttlMs` (other instances' changes), forgotten at once when this instance
// commits a change (onCommit, as routing and certificates are). A policy is compiled once per
// text: a request never touches the store nor compiles anything. The policy text is the
// endpoint's secret, sealed by the keyring (it holds credentials): opened here as it is loaded.

/** A cloud endpoint as the edge needs it. */
export interface EndpointPolicy {
  id: string;
  accountId: string;
  url: string;
  proto: EndpointProtocol;
  policy: CompiledPolicy;
}

export interface EndpointPolicies {
  /** The endpoint on `host` (or TCP address `host:port`), or undefined when none is. */
  forHost(host: string): Promise<EndpointPolicy | undefined>;
  /** Forgets every entry: an endpoint or an IP policy changed. */
  invalidate(): void;
  /** What a policy run reads from the service (IP policies, counters, the clock). */
  readonly services: PolicyServices;
}

const MAX_HOSTS = 10_000;
const MAX_POLICIES = 1_000;

interface Entry {
  at: number;
  value: Promise<EndpointPolicy | undefined>;
}

export function createEndpointPolicies(deps: {
  db: Queryable;
  ttlMs: number;
  /** Opens the stored policies; derives the keys of the login actions' session cookies. */
  keyring: Keyring;
  now?: () => number;
}): EndpointPolicies {
  const now = deps.now ?? Date.now;
  const hosts = new Map<string, Entry>();
  const compiled = new Map<string, CompiledPolicy>();
  const rules = new Map<string, { at: number; value: Promise<Map<string, RuleRow[]>> }>();

  function compiledOf(text: string, proto: EndpointProtocol): CompiledPolicy {
    const key = `${proto}:${text}`;
    let policy = compiled.get(key);
    if (policy === undefined) {
      // accepted when stored: this cannot throw but for a bug
      policy = compilePolicy(text, proto);
      if (compiled.size >= MAX_POLICIES) compiled.clear();
      compiled.set(key, policy);
    }
    return policy;
  }

  async function load(host: string): Promise<EndpointPolicy | undefined> {
    const result = await deps.db.query<{
      id: string;
      account_id: string;
      fields: Record<string, unknown>;
      secret: string;
    }>(
      "SELECT id, account_id, fields, secret FROM account_objects WHERE kind = 'endpoints' AND unique_key = $1",
      [host],
    );
    const row = result.rows[0];
    if (row === undefined) return undefined;
    const proto = row.fields.proto as EndpointProtocol;
    return {
      id: row.id,
      accountId: row.account_id,
      url: row.fields.url as string,
      proto,
      policy: compiledOf(deps.keyring.open(row.secret), proto),
    };
  }

  async function ipPolicyRules(accountId: string, ids: readonly string[]) {
    let entry = rules.get(accountId);
    if (entry === undefined || now() - entry.at > deps.ttlMs) {
      entry = { at: now(), value: loadRules(deps.db, accountId) };
      entry.value.catch(() => rules.delete(accountId));
      if (rules.size >= MAX_HOSTS) rules.clear();
      rules.set(accountId, entry);
    }
    const all = await entry.value;
    return new Map(ids.filter((id) => all.has(id)).map((id) => [id, all.get(id)!]));
  }

  return {
    forHost(host) {
      let entry = hosts.get(host);
      if (entry === undefined || now() - entry.at > deps.ttlMs) {
        entry = { at: now(), value: load(host) };
        entry.value.catch(() => hosts.delete(host));
        if (hosts.size >= MAX_HOSTS) hosts.clear();
        hosts.set(host, entry);
      }
      return entry.value;
    },
    invalidate() {
      hosts.clear();
      rules.clear();
    },
    services: {
      ipPolicyRules,
      state: new Map(),
      fetchJson: async (url) => {
        const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
        if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
        return res.json();
      },
      cookieKeys: deps.keyring.derive(COOKIE_KEY_PURPOSE),
      now,
    },
  };
}

type RuleRow = { cidr: string; action: 'allow' | 'deny' };

/** The rules of each of the account's IP policies. */
async function loadRules(db: Queryable, accountId: string): Promise<Map<string, RuleRow[]>> {
  const byPolicy = new Map<string, RuleRow[]>();
  for (const rule of await objectsOfKind(db, accountId, 'ip_policy_rules')) {
    if (rule.parent_id === null) continue;
    const list = byPolicy.get(rule.parent_id) ?? [];
    list.push({ cidr: rule.fields.cidr as string, action: rule.fields.action as 'allow' | 'deny' });
    byPolicy.set(rule.parent_id, list);
  }
  return byPolicy;
}
