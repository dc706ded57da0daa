import { describe, expect, it } from 'vitest';
import { bindPolicy, unsupportedOptions } from '../../src/agent-plane/ngrok/bind-policy-options.ts';
import { NgrokRefusal, ngrokError } from '../../src/agent-plane/ngrok/messages.ts';
import { proxyPreamble } from '../../src/agent-plane/ngrok/tunnel-session.ts';
import { runPhase } from '../../src/agent-plane/policy/index.ts';
import { requestExchange } from '../helpers/policy-exchange.ts';

// What a Bind's options may hold: what ngrok's SDKs send for a plain endpoint passes; every
// option the service does not apply is named, whatever its value's shape.

/** The HTTP options @ngrok/ngrok 1.7 sends for forward({ domain }). */
const PLAIN_HTTP = {
  Domain: 'app.example.com',
  Hostname: '',
  Auth: '',
  Subdomain: '',
  HostHeaderRewrite: false,
  LocalUrlScheme: null,
  ProxyProto: 0,
  Compression: null,
  CircuitBreaker: null,
  IPRestriction: null,
  BasicAuth: null,
  OAuth: null,
  OIDC: null,
  WebhookVerification: null,
  MutualTLSCA: null,
  RequestHeaders: null,
  ResponseHeaders: null,
  WebsocketTCPConverter: null,
  UserAgentFilter: null,
  TrafficPolicy: null,
};

describe('ngrok Bind options', () => {
  it('passes a plain endpoint, and names each option the service does not apply', () => {
    expect(unsupportedOptions(PLAIN_HTTP)).toEqual([]);
    expect(
      unsupportedOptions({ Addr: 'us.tcp.example:20001', ProxyProto: 0, IPRestriction: null }),
    ).toEqual([]);
    const used = {
      ...PLAIN_HTTP,
      BasicAuth: { Credentials: [{ Username: 'u', CleartextPassword: 'p' }] },
      Compression: {},
      TrafficPolicy: 'on_http_request: []',
      ProxyProto: 2,
      HostHeaderRewrite: true,
      Subdomain: 'x',
      SomethingNewer: 'set',
    };
    // Module options and TrafficPolicy become the endpoint's policy (bind-policy-options.ts).
    expect(unsupportedOptions(used).sort()).toEqual(
      ['ProxyProto', 'HostHeaderRewrite', 'Subdomain', 'SomethingNewer'].sort(),
    );
  });

  it("compiles module options before the agent's traffic_policy, and refuses what it cannot apply", () => {
    const policy = bindPolicy(
      {
        ...PLAIN_HTTP,
        BasicAuth: { Credentials: [{ Username: 'u', CleartextPassword: 'password1' }] },
        IPRestriction: { AllowCIDRs: ['10.0.0.0/8'] },
        UserAgentFilter: { Deny: ['(?i)curl'] },
        RequestHeaders: { add: ['X-From:agent'], remove: ['X-Secret'] },
        ResponseHeaders: { add: ['X-Served:yes'] },
        CircuitBreaker: { ErrorThreshold: 0.5 },
        Compression: {},
        TrafficPolicy: 'on_http_request:\n  - actions: [{type: deny}]\n',
      },
      'https',
    )!;
    const types = (phase: 'on_http_request' | 'on_http_response') =>
      policy.phases[phase].flatMap((rule) => rule.actions.map((a) => a.type));
    expect(types('on_http_request')).toEqual([
      'restrict-ips',
      'deny',
      'circuit-breaker',
      'basic-auth',
      'remove-headers',
      'add-headers',
      'deny',
    ]);
    expect(types('on_http_response')).toEqual(['add-headers', 'compress-response']);
    expect(bindPolicy(PLAIN_HTTP, 'https')).toBeUndefined();
    const refusal = (opts: Record<string, unknown>, proto = 'https') => {
      try {
        bindPolicy({ ...PLAIN_HTTP, ...opts }, proto);
      } catch (error) {
        return (error as NgrokRefusal).message;
      }
      return 'accepted';
    };
    expect(refusal({ TrafficPolicy: 'on_http_request:\n  - actions: [{type: nope}]\n' })).toMatch(
      /^invalid traffic_policy: traffic_policy: on_http_request rule 0 action 0 \(nope\).*unknown action type 'nope'/,
    );
    expect(refusal({ OAuth: { provider: 'google' } })).toMatch(
      /^invalid OAuth: .*\(oauth\).*client_id and client_secret are required/,
    );
    expect(refusal({ MutualTLSCA: { mutual_tls_ca: 'AA==' } })).toMatch(/option MutualTLSCA/);
    expect(refusal({ RequestHeaders: { add: ['no-colon'] } })).toMatch(
      /RequestHeaders: add\[0\] is not "Name:value"/,
    );
    expect(
      refusal({ BasicAuth: { Credentials: [{ Username: 'u', HashedPassword: 'eA==' }] } }),
    ).toMatch(/hashed passwords are not supported/);
    expect(refusal({ Addr: 'x:1', IPRestriction: { AllowCIDRs: [] } }, 'tcp')).toMatch(
      /option IPRestriction on tcp endpoints/,
    );
  });

  it('maps OAuth onto the oauth action, its allow lists onto a deny rule after the login', async () => {
    const policy = bindPolicy(
      {
        ...PLAIN_HTTP,
        OAuth: {
          provider: 'github',
          client_id: 'id',
          client_secret: 'secret',
          allow_emails: ['ada@example.com'],
          allow_domains: ['example.org'],
        },
      },
      'https',
    )!;
    const [login, allowList] = policy.phases.on_http_request;
    expect(login.actions.map((a) => a.type)).toEqual(['oauth']);
    expect(allowList.actions.map((a) => a.type)).toEqual(['deny']);
    const deniedFor = async (email: string) => {
      const x = requestExchange();
      x.values.actions.ngrok.oauth = { identity: { email } };
      const only = { ...policy, phases: { ...policy.phases, on_http_request: [allowList] } };
      await runPhase(only, 'on_http_request', x);
      return x.answer?.statusCode;
    };
    expect(await deniedFor('ada@example.com')).toBeUndefined();
    expect(await deniedFor('grace@example.org')).toBeUndefined();
    expect(await deniedFor('eve@example.com')).toBe(403);
  });

  it('writes refusals as ngrok does, and the proxy header as the SDK reads it', () => {
    expect(ngrokError('no', 'ERR_NGROK_107')).toEqual({ Error: 'no\nERR_NGROK_107' });
    expect(new NgrokRefusal('plain').answer()).toEqual({ Error: 'plain' });
    const preamble = proxyPreamble({
      Id: 'tn_1',
      ClientAddr: '1.2.3.4:5',
      Proto: 'https',
      EdgeType: '3',
      PassthroughTLS: false,
    });
    const length = Number(preamble.readBigInt64LE(0));
    expect(length).toBe(preamble.length - 8);
    expect(JSON.parse(preamble.subarray(8).toString())).toMatchObject({
      Id: 'tn_1',
      EdgeType: '3',
    });
  });
});
