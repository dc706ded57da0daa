import { describe, expect, it } from 'vitest';
import { compilePolicy, PolicyError } from '../../src/agent-plane/policy/index.ts';
import { policyServices, requestExchange, runRequest } from '../helpers/policy-exchange.ts';

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

function refused(text: string): string {
  try {
    compilePolicy(text);
  } catch (err) {
    if (err instanceof PolicyError) return err.message;
    throw err;
  }
  throw new Error('accepted');
}

describe('basic-auth', () => {
  const policy = compilePolicy(`
on_http_request:
  - actions:
      - type: basic-auth
        config:
          realm: Staging
          credentials: ["alice:correct horse", "bob:battery staple"]
`);

  it('lets a listed credential through and says who', async () => {
    const x = await runRequest(
      policy,
      requestExchange({ headers: { authorization: basic('bob', 'battery staple') } }),
    );
    expect(x.answer).toBeUndefined();
    expect(x.decisions.basicAuth).toEqual({ decision: 'allow', username: 'bob' });
    expect(x.values.actions.ngrok.basic_auth).toEqual({
      credentials: { presented: true, username: 'bob', authorized: true },
    });
  });

  it('answers 401 with the realm to a wrong password or none', async () => {
    const wrong = await runRequest(
      policy,
      requestExchange({ headers: { authorization: basic('alice', 'wrong password') } }),
    );
    expect(wrong.answer?.statusCode).toBe(401);
    expect(wrong.answer?.headers['www-authenticate']).toEqual([
      'Basic realm="Staging", charset="UTF-8"',
    ]);
    expect(wrong.decisions.basicAuth).toEqual({ decision: 'block', username: 'alice' });
    const none = await runRequest(policy, requestExchange());
    expect(none.decisions.basicAuth).toEqual({ decision: 'block', username: '' });
  });

  it('with enforce false only reports, and refuses short passwords and more than 10 credentials', async () => {
    const x = await runRequest(
      'on_http_request:\n  - actions:\n      - type: basic-auth\n        config: {enforce: false, credentials: ["a:12345678"]}\n',
      requestExchange(),
    );
    expect(x.answer).toBeUndefined();
    expect(x.decisions.basicAuth.decision).toBe('block');
    expect(
      refused(
        'on_http_request:\n  - actions:\n      - type: basic-auth\n        config: {credentials: ["a:short"]}\n',
      ),
    ).toMatch(/config.credentials\[0\].*a password has 8 to 128 characters/);
    const eleven = JSON.stringify(Array.from({ length: 11 }, (_, i) => `u${i}:password${i}`));
    expect(
      refused(
        `on_http_request:\n  - actions:\n      - type: basic-auth\n        config: {credentials: ${eleven}}\n`,
      ),
    ).toMatch(/config.credentials \(document line 3\): must NOT have more than 10 items/);
  });
});

describe('restrict-ips', () => {
  it('allows an address an allowed CIDR holds and no denied one does, with the account IP policies', async () => {
    const policy = compilePolicy(`
on_http_request:
  - actions:
      - type: restrict-ips
        config:
          allow: [203.0.113.0/24]
          ip_policies: [ipp_office]
`);
    const services = policyServices(undefined, {
      ipp_office: [
        { cidr: '198.51.100.0/24', action: 'allow' },
        { cidr: '203.0.113.66/32', action: 'deny' },
      ],
    });
    const allowed = await runRequest(
      policy,
      requestExchange({ clientIp: '198.51.100.9' }, services),
    );
    expect(allowed.answer).toBeUndefined();
    expect(allowed.decisions.ipPolicy).toBe('allow');
    expect(allowed.values.actions.ngrok.restrict_ips).toMatchObject({
      action: 'allow',
      matched_cidr: '198.51.100.0/24',
    });
    const denied = await runRequest(
      policy,
      requestExchange({ clientIp: '203.0.113.66' }, services),
    );
    expect(denied.answer?.statusCode).toBe(403);
    expect(denied.decisions.ipPolicy).toBe('block');
    expect(denied.values.actions.ngrok.restrict_ips).toMatchObject({
      action: 'deny',
      matched_cidr: '203.0.113.66/32',
    });
    const elsewhere = await runRequest(
      policy,
      requestExchange({ clientIp: '192.0.2.1' }, services),
    );
    expect(elsewhere.decisions.ipPolicy).toBe('block');
  });

  it('refuses what is not a CIDR, and closes the connection in on_tcp_connect', () => {
    expect(
      refused(
        'on_tcp_connect:\n  - actions:\n      - type: restrict-ips\n        config: {allow: [10.0.0.0/33]}\n',
      ),
    ).toMatch(/config.allow\[0\] \(document line 3\): not an IP or CIDR/);
  });
});

describe('rate-limit', () => {
  it('admits capacity per window per bucket key, then 429 with Retry-After; the window slides', async () => {
    const clock = { now: 1_000_000 };
    const services = policyServices(clock);
    const policy = compilePolicy(`
on_http_request:
  - actions:
      - type: rate-limit
        config:
          name: per-ip
          algorithm: sliding_window
          capacity: 3
          rate: 60s
          bucket_key: [conn.client_ip]
`);
    const from = (ip: string) => runRequest(policy, requestExchange({ clientIp: ip }, services));
    for (let i = 0; i < 3; i++) expect((await from('192.0.2.1')).answer).toBeUndefined();
    const limited = await from('192.0.2.1');
    expect(limited.answer?.statusCode).toBe(429);
    expect(limited.answer?.headers['retry-after']).toEqual(['60']);
    expect(limited.values.actions.ngrok.rate_limit).toMatchObject({
      limited: true,
      bucket_key: '192.0.2.1',
    });
    expect((await from('192.0.2.2')).answer).toBeUndefined();
    // Half of the previous window still counts: 3 × 0.5 = 1.5, then 2.5 (both < 3), then 3.5.
    clock.now += 90_000;
    expect((await from('192.0.2.1')).answer).toBeUndefined();
    expect((await from('192.0.2.1')).answer).toBeUndefined();
    expect((await from('192.0.2.1')).answer?.statusCode).toBe(429);
    clock.now += 120_000;
    expect((await from('192.0.2.1')).answer).toBeUndefined();
  });

  it('refuses an algorithm other than sliding_window and a rate that is not a duration', () => {
    const base =
      'on_http_request:\n  - actions:\n      - type: rate-limit\n        config: {name: a, capacity: 1, bucket_key: [req.host], ';
    expect(refused(`${base}algorithm: token_bucket, rate: 1s}\n`)).toMatch(
      /config.algorithm \(document line 3\): must be one of "sliding_window"/,
    );
    expect(refused(`${base}algorithm: sliding_window, rate: soon}\n`)).toMatch(
      /config.rate \(document line 3\): 'soon' is not a duration/,
    );
  });
});

describe('url-rewrite, redirect, headers, log, set-vars, custom-response', () => {
  it('rewrites the path the upstream gets with capture groups, and later rules see it', async () => {
    const x = await runRequest(
      `
on_http_request:
  - actions:
      - type: url-rewrite
        config: {from: "/products/([0-9]+)", to: "/items?id=$1"}
  - expressions: ["req.url.path == '/items'"]
    actions:
      - type: add-headers
        config: {headers: {x-rewritten: "\${req.url.query}"}}
`,
      requestExchange({ target: '/products/42' }),
    );
    expect(x.request?.target).toBe('/items?id=42');
    expect(x.request?.headers['x-rewritten']).toEqual(['id=42']);
  });

  it('redirects when from matches and lets the request go on when it does not', async () => {
    const policy = compilePolicy(
      'on_http_request:\n  - actions:\n      - type: redirect\n        config: {from: "^http://(.*)$", to: "https://$1", status_code: 301}\n',
    );
    const x = await runRequest(policy, requestExchange({ target: '/a?b=1' }));
    expect(x.answer).toBeUndefined();
    const y = await runRequest(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
      'on_http_request:\n  - actions:\n      - type: redirect\n        config: {to: "https://example.net${req.url.path}"}\n',
      requestExchange({ target: '/a' }),
    );
    expect(y.answer).toEqual({
      statusCode: 302,
      headers: { location: ['https://example.net/a'] },
      body: '',
    });
  });

  it('adds and removes request and response headers; log and set-vars feed the event and later rules', async () => {
    const x = await runRequest(
      `
on_http_request:
  - actions:
      - type: set-vars
        config: {vars: [{tier: "gold-\${req.method}"}, {limit: 5}]}
      - type: remove-headers
        config: {headers: [Cookie]}
      - type: log
        config: {metadata: {tier: "\${vars.tier}", limit: 5, nested: {a: 1}}}
on_http_response:
  - expressions: ["vars.limit == 5 && res.status_code == 201"]
    actions:
      - type: add-headers
        config: {headers: {x-tier: "\${vars.tier}"}}
      - type: remove-headers
        config: {headers: [server]}
`,
      requestExchange({ headers: { cookie: 'a=b' } }),
      { statusCode: 201, headers: { server: 'agent' } },
    );
    expect(x.request?.headers.cookie).toBeUndefined();
    expect(x.response?.headers).toEqual({ 'x-tier': ['gold-GET'] });
    expect(x.decisions.logs).toEqual([{ tier: 'gold-GET', limit: 5, nested: { a: 1 } }]);
  });
});

describe('circuit-breaker and compress-response', () => {
  it('opens after enough 5xx answers, answers 503 while open, and closes after tripped_duration', async () => {
    const clock = { now: 5_000_000 };
    const services = policyServices(clock);
    const policy = compilePolicy(`
on_http_request:
  - actions:
      - type: circuit-breaker
        config: {error_threshold: 0.5, volume_threshold: 4, window_duration: 10s, tripped_duration: 30s}
`);
    for (const status of [200, 500, 502, 503]) {
      const x = await runRequest(policy, requestExchange({}, services), { statusCode: status });
      expect(x.decisions.circuitBreaker).toBe('allow');
    }
    const open = await runRequest(policy, requestExchange({}, services));
    expect(open.answer?.statusCode).toBe(503);
    expect(open.decisions.circuitBreaker).toBe('block');
    clock.now += 31_000;
    const closed = await runRequest(policy, requestExchange({}, services));
    expect(closed.answer).toBeUndefined();
    expect(closed.decisions.circuitBreaker).toBe('allow');
  });

  it('compress-response keeps gzip and deflate and refuses br', async () => {
    const x = await runRequest(
      'on_http_response:\n  - actions: [{type: compress-response}]\n',
      requestExchange(),
    );
    expect(x.compress).toEqual(['gzip', 'deflate']);
    expect(
      refused(
        'on_http_response:\n  - actions: [{type: compress-response, config: {algorithms: [br]}}]\n',
      ),
    ).toMatch(/config.algorithms\[0\] \(document line 2\): 'br' is not supported/);
  });

  it('forward-internal names an internal URL only; close-connection takes no config', async () => {
    expect(
      refused(
        'on_http_request:\n  - actions: [{type: forward-internal, config: {url: "https://example.com"}}]\n',
      ),
    ).toMatch(/is not an internal endpoint's URL/);
    const forward = (onError: string) =>
      `on_http_request:\n  - actions:\n    - {type: forward-internal, config: {url: "http://api.internal", on_error: ${onError}}}\n    - {type: custom-response, config: {status_code: 503, body: fallback}}\n`;
    const online = requestExchange();
    online.internalOnline = (host) => host === 'api.internal';
    expect((await runRequest(forward('halt'), online)).forward).toEqual({
      url: 'http://api.internal',
      hostname: 'api.internal',
    });
    const offline = requestExchange();
    offline.internalOnline = () => false;
    const halted = await runRequest(forward('halt'), offline);
    expect(halted.forward).toBeUndefined();
    expect(halted.answer?.statusCode).toBe(404);
    expect(String(halted.answer?.body)).toMatch(
      /http:\/\/api.internal is offline.*ERR_NGROK_3200/s,
    );
    const continued = requestExchange();
    continued.internalOnline = () => false;
    expect((await runRequest(forward('continue'), continued)).answer?.statusCode).toBe(503);
    // An internal endpoint's own policy (no internalOnline) forwards no further.
    const second = await runRequest(forward('halt'), requestExchange());
    expect(String(second.answer?.body)).toMatch(/does not forward again/);
    expect(
      refused('on_http_request:\n  - actions: [{type: close-connection, config: {now: true}}]\n'),
    ).toMatch(/unknown field 'now'/);
  });
});
