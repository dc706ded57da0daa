import { describe, expect, it } from 'vitest';
import {
  compilePolicy,
  connectionValues,
  createExchange,
  PolicyError,
  runPhase,
} from '../../src/agent-plane/policy/index.ts';
import { userAgentValues } from '../../src/agent-plane/policy/user-agent.ts';
import { policyServices, requestExchange, runRequest } from '../helpers/policy-exchange.ts';

// A TCP endpoint's policy (on_tcp_connect only, no req/res/conn.tls), run on a connection as
// the edge's TCP accept path runs it; and the variables the documentation corpus asked for.

function tcpRefusal(text: string): PolicyError {
  try {
    compilePolicy(text, 'tcp');
  } catch (err) {
    if (err instanceof PolicyError) return err;
    throw err;
  }
  throw new Error('the policy was accepted');
}

function connection(clientIp: string) {
  return createExchange({
    accountId: 'acct_test',
    endpointId: 'ep_tcp',
    services: policyServices(),
    values: connectionValues({
      clientIp,
      clientPort: 50000,
      serverIp: '127.0.0.1',
      serverPort: 20001,
      startMs: Date.now(),
      endpoint: { id: 'ep_tcp', url: 'tcp://tcp.example.test:20001', protocol: 'tcp' },
    }),
  });
}

describe("a TCP endpoint's Traffic Policy", () => {
  it('refuses the HTTP phases, the HTTP variables and conn.tls, with where', () => {
    const phase = tcpRefusal(
      'on_tcp_connect: []\non_http_response:\n  - actions: [{type: deny}]\n',
    );
    expect(phase.code).toBe('unsupported_phase');
    expect(phase.location).toEqual({ phase: 'on_http_response', line: 3 });
    const action = tcpRefusal('on_tcp_connect:\n  - actions: [{type: custom-response}]\n');
    expect(action.code).toBe('unsupported_phase');
    expect(action.location.action).toEqual({ index: 0, type: 'custom-response' });
    const res = tcpRefusal(
      'on_tcp_connect:\n  - expressions: ["res.status_code == 200"]\n    actions: [{type: deny}]\n',
    );
    expect(res.message).toContain(
      "'res.status_code' is not available on a TCP endpoint: its connections carry no HTTP response",
    );
    const tls = tcpRefusal(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
      'on_tcp_connect:\n  - actions: [{type: log, config: {metadata: {v: "${conn.tls.version}"}}}]\n',
    );
    expect(tls.location).toMatchObject({ field: 'config.metadata.v', position: { column: 3 } });
    expect(tls.message).toContain("'conn.tls.version' is not available on a TCP endpoint");
  });

  it('closes a denied connection and reports the decision and the logs', async () => {
    const policy = compilePolicy(
      `
on_tcp_connect:
  - actions:
      - type: log
        config: {metadata: {port: "\${endpoint.port}", from: "\${conn.client_ip}"}}
      - type: restrict-ips
        config: {deny: [203.0.113.0/24], allow: [0.0.0.0/0]}
`,
      'tcp',
    );
    const denied = connection('203.0.113.9');
    expect(await runPhase(policy, 'on_tcp_connect', denied)).toBe('stop');
    expect(denied.close).toBe(true);
    expect(denied.decisions.ipPolicy).toBe('block');
    expect(denied.decisions.logs).toEqual([{ port: '20001', from: '203.0.113.9' }]);
    const allowed = connection('198.51.100.1');
    expect(await runPhase(policy, 'on_tcp_connect', allowed)).toBe('continue');
    expect(allowed.close).toBeUndefined();
    expect(allowed.decisions.ipPolicy).toBe('allow');
  });
});

describe('variables ngrok documents that its examples use', () => {
  it('tells tablets, phones and desktops apart (req.user_agent.is_tablet, is_desktop)', async () => {
    const ipad =
      'Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1';
    const phone =
      'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/120.0 Mobile Safari/537.36';
    const desktop =
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36';
    expect(userAgentValues(ipad)).toMatchObject({ is_tablet: true, is_mobile: false });
    expect(userAgentValues(phone)).toMatchObject({ is_tablet: false, is_mobile: true });
    expect(userAgentValues(desktop)).toMatchObject({ is_desktop: true, is_mobile: false });
    const policy = `
on_http_request:
  - expressions: [req.user_agent.is_tablet]
    actions: [{type: custom-response, config: {status_code: 200, body: tablet}}]
`;
    const x = await runRequest(policy, requestExchange({ headers: { 'user-agent': ipad } }));
    expect(x.answer?.body).toBe('tablet');
  });

  it('says why conn.client_ip.categories cannot be read, not that a string cannot be indexed', () => {
    expect(() =>
      compilePolicy(
        'on_http_request:\n  - expressions: ["\'com.github\' in conn.client_ip.categories"]\n    actions: [{type: deny}]\n',
      ),
    ).toThrow(
      "'conn.client_ip.categories' is an ngrok variable this service does not provide (this service has no IP intelligence data)",
    );
  });
});
