import {
  type Cidr,
  cidrContains,
  parseCallerAddress,
  parseCidr,
} from '../../../shared/net/cidr.ts';
import { defineAction, type Outcome } from '../action.ts';
import { type Exchange, setResult } from '../exchange.ts';
import type { Template } from '../interpolate.ts';

// restrict-ips: the connection's address (conn.client_ip, never X-Forwarded-For) passes only
// if some allowed CIDR holds it and no denied one does, as ngrok documents; the CIDRs are the
// config's `allow` and `deny` and the rules of the account's IP policies named in
// `ip_policies` (read from the service's cache, never the store per request). Refused: 403 over
// HTTP, the connection closed in on_tcp_connect; with `enforce: false` it only reports.
// ip_policy.decision of the event says allow or block.

interface Config {
  enforce?: boolean;
  allow?: string[];
  deny?: string[];
  ip_policies?: string[];
}

const CIDR_LIST = { type: 'array', maxItems: 256, items: { type: 'string', maxLength: 256 } };

type Lists = { allowed: { cidr: Cidr; text: string }[]; denied: { cidr: Cidr; text: string }[] };

type Entry = { template: Template; cidr: Cidr | undefined; text: string };

function entries(list: string[], field: string, ctx: Parameters<typeof RESTRICT_IPS.compile>[1]) {
  return list.map((text, i): Entry => {
    const template = ctx.template(text, `${field}[${i}]`);
    let cidr: Cidr | undefined;
    if (template.constant !== undefined) {
      try {
        cidr = parseCidr(template.constant);
      } catch (err) {
        ctx.fail(`${field}[${i}]`, `not an IP or CIDR: ${(err as Error).message}`);
      }
    }
    return { template, cidr, text };
  });
}

function resolve(entry: Entry, values: unknown): { cidr: Cidr; text: string } | undefined {
  if (entry.cidr !== undefined) return { cidr: entry.cidr, text: entry.text };
  const text = entry.template.render(values);
  try {
    return { cidr: parseCidr(text), text };
  } catch {
    return undefined; // a CIDR made per request that is not one holds no address
  }
}

/** The CIDRs of `list` on `values` (constant entries need none). */
function resolveAll(list: readonly Entry[], values: unknown): { cidr: Cidr; text: string }[] {
  const out: { cidr: Cidr; text: string }[] = [];
  for (const e of list) {
    const r = resolve(e, values);
    if (r) out.push(r);
  }
  return out;
}

export const RESTRICT_IPS = defineAction<Config>({
  type: 'restrict-ips',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      enforce: { type: 'boolean' },
      allow: CIDR_LIST,
      deny: CIDR_LIST,
      ip_policies: {
        type: 'array',
        maxItems: 32,
        items: { type: 'string', pattern: '^ipp_[A-Za-z0-9]+$' },
      },
    },
  },
  compile(config, ctx) {
    const allow = entries(config.allow ?? [], 'allow', ctx);
    const deny = entries(config.deny ?? [], 'deny', ctx);
    const policies = config.ip_policies ?? [];
    if (allow.length + deny.length + policies.length === 0) {
      ctx.fail('allow', 'at least one of allow, deny and ip_policies is required');
    }
    const enforce = config.enforce ?? true;
    // Without `${…}` and IP policies the lists are the same for every request: resolved once.
    const constant =
      policies.length === 0 && [...allow, ...deny].every((e) => e.cidr !== undefined)
        ? { allowed: resolveAll(allow, undefined), denied: resolveAll(deny, undefined) }
        : undefined;
    let lastIp: string | undefined;
    let lastAddress: ReturnType<typeof parseCallerAddress>;
    const addressOf = (ip: string) => {
      if (ip !== lastIp) {
        lastIp = ip;
        lastAddress = parseCallerAddress(ip);
      }
      return lastAddress;
    };
    return (x) => (constant ? decide(x, constant) : lists(x).then((l) => decide(x, l)));

    /** Whether the connection's address passes `allowed` and `denied`, as the result says. */
    function decide(x: Exchange, { allowed, denied }: Lists): Outcome {
      const address = addressOf(String(x.values.conn.client_ip ?? ''));
      const holds = (c: { cidr: Cidr }) => address !== undefined && cidrContains(c.cidr, address);
      const deniedBy = denied.find(holds);
      const allowedBy = allowed.find(holds);
      const pass = deniedBy === undefined && allowedBy !== undefined;
      setResult(x, 'restrict-ips', {
        action: pass ? 'allow' : 'deny',
        matched_cidr: (deniedBy ?? allowedBy)?.text ?? '',
        ...(pass
          ? {}
          : {
              error: {
                code: 'ERR_IP_RESTRICTED',
                message: `The IP address ${String(x.values.conn.client_ip)} is not allowed.`,
              },
            }),
      });
      // One block anywhere makes the request's decision a block.
      if (x.decisions.ipPolicy !== 'block') x.decisions.ipPolicy = pass ? 'allow' : 'block';
      if (pass || !enforce) return 'continue';
      if (ctx.phase === 'on_tcp_connect') x.close = true;
      else {
        x.answer = {
          statusCode: 403,
          headers: { 'content-type': ['text/plain'] },
          body: 'Your IP address is not allowed to reach this endpoint.\n',
        };
      }
      return 'stop';
    }

    /** The allowed and denied CIDRs of one request: the config's, then its IP policies'. */
    async function lists(x: Exchange): Promise<Lists> {
      const allowed = resolveAll(allow, x.values);
      const denied = resolveAll(deny, x.values);
      if (policies.length > 0) {
        const rules = await x.services.ipPolicyRules(x.accountId, policies);
        for (const id of policies) {
          for (const rule of rules.get(id) ?? []) {
            (rule.action === 'deny' ? denied : allowed).push({
              cidr: parseCidr(rule.cidr),
              text: rule.cidr,
            });
          }
        }
      }
      return { allowed, denied };
    }
  },
});
