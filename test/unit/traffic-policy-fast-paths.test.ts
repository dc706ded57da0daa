import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../src/agent-plane/policy/index.ts';
import { requestExchange, runRequest } from '../helpers/policy-exchange.ts';

// What the per-request shortcuts must not change: a remembered good Authorization value, a
// variable read without the evaluator, values shared between requests.

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('per-request shortcuts', () => {
  it('basic-auth remembers good values only: a wrong one after a good one is still refused', async () => {
    const policy = compilePolicy(`
on_http_request:
  - actions:
      - type: basic-auth
        config: {credentials: ["alice:correct horse"]}
`);
    for (let i = 0; i < 2; i++) {
      const good = await runRequest(
        policy,
        requestExchange({ headers: { authorization: basic('alice', 'correct horse') } }),
      );
      expect(good.answer).toBeUndefined();
      expect(good.decisions.basicAuth).toEqual({ decision: 'allow', username: 'alice' });
      expect(good.values.actions.ngrok.basic_auth).toEqual({
        credentials: { presented: true, username: 'alice', authorized: true },
      });
      const wrong = await runRequest(
        policy,
        requestExchange({ headers: { authorization: basic('alice', 'correct horsE') } }),
      );
      expect(wrong.answer?.statusCode).toBe(401);
      expect(wrong.decisions.basicAuth).toEqual({ decision: 'block', username: 'alice' });
    }
  });

  it('an interpolated variable renders as the evaluator renders it, strings read directly, others not', async () => {
    const x = await runRequest(
      `
on_http_request:
  - actions:
      - type: set-vars
        config: {vars: [{count: 3}, {name: "ann"}]}
      - type: add-headers
        config:
          headers:
            x-path: "\${req.url.path}"
            x-port: "\${conn.server_port}"
            x-count: "\${vars.count}"
            x-name: "\${ vars . name }"
            x-none: "\${actions.ngrok.nothing.here}"
            x-url: "\${req.url}"
`,
      requestExchange({ target: '/a/b?q=1' }),
    );
    expect(x.request?.headers['x-path']).toEqual(['/a/b']);
    expect(x.request?.headers['x-port']).toEqual(['443']);
    expect(x.request?.headers['x-count']).toEqual(['3']);
    expect(x.request?.headers['x-name']).toEqual(['ann']);
    expect(x.request?.headers['x-none']).toEqual(['']);
    expect(x.request?.headers['x-url']).toEqual(['https://app.example.test/a/b?q=1']);
  });

  it('values shared between requests are frozen, and each request sees its own URL', async () => {
    const a = requestExchange({ target: '/one', headers: { 'user-agent': 'curl/8.0' } });
    const b = requestExchange({ target: '/two', headers: { 'user-agent': 'curl/8.0' } });
    expect((a.values.req!.url as { path: string }).path).toBe('/one');
    expect((b.values.req!.url as { path: string }).path).toBe('/two');
    expect(a.values.req?.user_agent).toBe(b.values.req?.user_agent);
    expect(Object.isFrozen(a.values.req?.user_agent)).toBe(true);
    expect(Object.isFrozen(a.values.endpoint)).toBe(true);
  });
});
