import { describe, expect, it } from 'vitest';
import { compilePolicy, PolicyError } from '../../src/agent-plane/policy/index.ts';
import { requestExchange, runRequest } from '../helpers/policy-exchange.ts';

function refusal(text: string): PolicyError {
  try {
    compilePolicy(text);
  } catch (err) {
    if (err instanceof PolicyError) return err;
    throw err;
  }
  throw new Error('the policy was accepted');
}

describe('a Traffic Policy document', () => {
  it('runs rules in order, ANDs expressions, and a terminating action ends the phase', async () => {
    const policy = compilePolicy(`
on_http_request:
  - name: admin only from inside
    expressions:
      - req.url.path.startsWith('/admin')
      - "!inCidrRange(conn.client_ip, '10.0.0.0/8')"
    actions:
      - type: custom-response
        config:
          status_code: 403
          body: "no admin for \${conn.client_ip} on \${req.url.path}"
  - actions:
      - type: add-headers
        config:
          headers:
            x-seen: "yes"
`);
    const outside = await runRequest(policy, requestExchange({ target: '/admin/x' }));
    expect(outside.answer).toEqual({
      statusCode: 403,
      headers: {},
      body: 'no admin for 203.0.113.7 on /admin/x',
    });
    expect(outside.request?.headers['x-seen']).toBeUndefined();
    const inside = await runRequest(
      policy,
      requestExchange({ target: '/admin/x', clientIp: '10.1.2.3' }),
    );
    expect(inside.answer).toBeUndefined();
    expect(inside.request?.headers['x-seen']).toEqual(['yes']);
  });

  it('accepts JSON as well as YAML, and a rule without expressions matches everything', async () => {
    const x = await runRequest(
      JSON.stringify({
        on_http_request: [{ actions: [{ type: 'deny', config: { status_code: 404 } }] }],
      }),
      requestExchange(),
    );
    expect(x.answer?.statusCode).toBe(404);
  });

  it('reads the string groups as strings and their parts as fields', async () => {
    const x = await runRequest(
      `
on_http_request:
  - expressions:
      - "req.url.contains('/v1/') && req.user_agent.matches('(?i)firefox') && req.user_agent.name == 'Firefox'"
      - "getQueryParam('a') == ['1', '2'] && hasReqHeader('X-Token')"
    actions:
      - type: custom-response
        config:
          body: "\${req.url} \${req.url.query_params['a'][1]} \${getReqHeader('x-token')[0]}"
`,
      requestExchange({
        target: '/v1/items?a=1&a=2',
        headers: {
          'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0',
          'x-token': 'abc',
        },
      }),
    );
    expect(x.answer?.body).toBe('https://app.example.test/v1/items?a=1&a=2 2 abc');
  });

  it('refuses a syntax error with its phase, rule, field and column', () => {
    const e = refusal(`
on_http_request:
  - name: broken
    expressions:
      - "req.method == 'GET' &&"
    actions:
      - type: deny
`);
    expect(e.code).toBe('invalid_expression');
    expect(e.location).toMatchObject({
      phase: 'on_http_request',
      rule: { index: 0, name: 'broken' },
      field: 'expressions[0]',
      line: 5,
    });
    expect(e.message).toMatch(
      /^traffic_policy: on_http_request rule 0 \("broken"\) expressions\[0\] at line 1, column \d+ \(document line 5\): syntax error/,
    );
  });

  it('refuses an unknown variable, and names ngrok variables it cannot fill', () => {
    expect(
      refusal("on_http_request:\n  - expressions: ['req.nope == 1']\n    actions: [{type: deny}]")
        .message,
    ).toMatch(/unknown field 'req.nope'/);
    expect(
      refusal(
        'on_http_request:\n  - expressions: ["conn.geo.country_code == \'FR\'"]\n    actions: [{type: deny}]',
      ).message,
    ).toMatch(
      /'conn.geo.country_code' is an ngrok variable this service does not provide \(this service has no GeoIP database\)/,
    );
  });

  it('refuses an unknown action, a field its config does not have, and a bad interpolation in a config string', () => {
    const unknown = refusal('on_http_request:\n  - actions:\n      - type: teleport\n');
    expect(unknown.code).toBe('unknown_action');
    expect(unknown.location).toMatchObject({
      rule: { index: 0 },
      action: { index: 0, type: 'teleport' },
      line: 3,
    });
    const field = refusal(
      'on_http_request:\n  - actions:\n      - type: close-connection\n      - type: basic-auth\n        config:\n          credentials: ["user:password1"]\n          relm: x\n',
    );
    expect(field.message).toBe(
      "traffic_policy: on_http_request rule 0 action 1 (basic-auth) config (document line 4): unknown field 'relm'",
    );
    const template = refusal(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
      'on_http_request:\n  - actions:\n      - type: add-headers\n        config:\n          headers:\n            x-a: "ip=${conn.client_ipp}"\n',
    );
    expect(template.location).toMatchObject({
      action: { index: 0, type: 'add-headers' },
      field: 'config.headers.x-a',
      position: { line: 1, column: 6 },
    });
    expect(template.message).toMatch(/unknown field 'conn.client_ipp'; variables: conn.bytes_in/);
  });

  it('refuses a header value with a CR, LF or NUL written into it, in every action that sets headers', () => {
    const actions = [
      ['add-headers', 'on_http_request', ''],
      ['add-headers', 'on_http_response', ''],
      ['custom-response', 'on_http_request', 'status_code: 200, '],
      ['redirect', 'on_http_request', 'to: "/elsewhere", '],
    ];
    for (const [type, phase, rest] of actions) {
      for (const value of ['one\\r\\nx-injected: yes', 'line\\nbreak', 'nul\\0']) {
        const refused = refusal(
          `${phase}:\n  - actions:\n      - type: ${type}\n        config: {${rest}headers: {x-name: "${value}"}}\n`,
        );
        expect(refused.location, `${type} ${value}`).toMatchObject({
          action: { index: 0, type },
          field: 'config.headers.x-name',
        });
        expect(refused.message).toMatch(/a header value cannot hold a CR, LF or NUL character/);
      }
    }
    // A value from a variable is a template, checked as the head is sent (the edge's 502).
    expect(() =>
      compilePolicy(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
        'on_http_request:\n  - actions:\n      - type: add-headers\n        config: {headers: {x-name: "${getQueryParam(\'name\')[0]}"}}\n',
      ),
    ).not.toThrow();
  });

  it('refuses an action in a phase it does not run in, an unknown phase, and a rule without actions', () => {
    expect(
      refusal(
        'on_tcp_connect:\n  - actions: [{type: basic-auth, config: {credentials: ["a:bcdefghi"]}}]',
      ).code,
    ).toBe('unsupported_phase');
    expect(refusal('on_request:\n  - actions: [{type: deny}]').message).toMatch(
      /unknown phase 'on_request'/,
    );
    expect(refusal('on_http_request:\n  - name: x').message).toMatch(/actions is required/);
    expect(refusal('on_http_request: [{actions: [{type: deny}]}]\nx: &a [*a]').code).toBe(
      'invalid_document',
    );
  });
});
