import { createHash } from 'node:crypto';
import {
  type CompiledPolicy,
  compilePolicy,
  connectionValues,
  createExchange,
  type Exchange,
  headerMap,
  type PolicyServices,
  runPhase,
  withRequest,
  withResponse,
} from '../../src/agent-plane/policy/index.ts';

// A request as the edge would present it to a policy, for the actions' unit tests: real
// variables built by values.ts, real services except the clock (a field tests move).

export interface FakeClock {
  now: number;
}

export function policyServices(
  clock: FakeClock = { now: Date.now() },
  ipPolicies: Record<string, { cidr: string; action: 'allow' | 'deny' }[]> = {},
): PolicyServices {
  return {
    ipPolicyRules: async (_account, ids) =>
      new Map(ids.filter((id) => id in ipPolicies).map((id) => [id, ipPolicies[id]])),
    state: new Map(),
    fetchJson: async (url) => (await fetch(url)).json(),
    cookieKeys: [createHash('sha256').update('policy-exchange test cookies').digest()],
    now: () => clock.now,
  };
}

export interface RequestInit {
  method?: string;
  target?: string;
  host?: string;
  headers?: Record<string, string | string[]>;
  clientIp?: string;
}

/** An exchange for one HTTP request to https://app.example.test. */
export function requestExchange(init: RequestInit = {}, services = policyServices()): Exchange {
  const host = init.host ?? 'app.example.test';
  const headers = headerMap({ host, ...(init.headers ?? {}) });
  const values = withRequest(
    connectionValues({
      clientIp: init.clientIp ?? '203.0.113.7',
      clientPort: 50000,
      serverIp: '127.0.0.1',
      serverPort: 443,
      startMs: Date.now(),
      endpoint: { id: 'ep_test', url: `https://${host}`, protocol: 'https' },
    }),
    {
      method: init.method ?? 'GET',
      scheme: 'https',
      host,
      target: init.target ?? '/',
      httpVersion: '1.1',
      headers,
    },
  );
  return createExchange({
    accountId: 'acct_test',
    endpointId: 'ep_test',
    values,
    services,
    request: { method: init.method ?? 'GET', target: init.target ?? '/', headers },
  });
}

/** Runs on_http_request, then (when nothing answered) on_http_response with `upstream`. */
export async function runRequest(
  policy: CompiledPolicy | string,
  x: Exchange,
  upstream: { statusCode: number; headers?: Record<string, string> } = { statusCode: 200 },
): Promise<Exchange> {
  const compiled = typeof policy === 'string' ? compilePolicy(policy) : policy;
  const outcome = await runPhase(compiled, 'on_http_request', x);
  if (outcome === 'stop') return x;
  x.response = { statusCode: upstream.statusCode, headers: headerMap(upstream.headers ?? {}) };
  withResponse(x.values, x.response);
  await runPhase(compiled, 'on_http_response', x);
  for (const after of x.afterResponse) after(x.answer?.statusCode ?? upstream.statusCode);
  return x;
}
