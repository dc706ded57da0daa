import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { compilePolicy } from '../../src/agent-plane/policy/index.ts';
import { redactPolicySecrets } from '../../src/control-plane/api/endpoints/redact-policy.ts';

// What an endpoint's audit events carry of its policy: the document, each secret value replaced.

describe('redactPolicySecrets', () => {
  it('redacts every credential, client secret and webhook secret of a JSON document', () => {
    const policy = JSON.stringify({
      on_http_request: [
        {
          actions: [
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
            { type: 'basic-auth', config: { credentials: ['ada:lovelace-1815', '${vars.pair}'] } },
            {
              type: 'oauth',
              config: { provider: 'google', client_id: 'app', client_secret: 'oauth-s3cret' },
            },
          ],
        },
        {
          expressions: ["req.url.path == '/hook'"],
          actions: [
            { type: 'verify-webhook', config: { provider: 'slack', secret: 'hook-s3cret' } },
          ],
        },
      ],
      on_http_response: [],
    });
    compilePolicy(policy, 'https'); // a document the API accepts
    const redacted = redactPolicySecrets(policy);
    expect(redacted).not.toMatch(/lovelace-1815|oauth-s3cret|hook-s3cret|vars\.pair/);
    const actions = (doc: string) =>
      parse(doc).on_http_request.flatMap((rule: { actions: unknown[] }) => rule.actions);
    const expected = actions(policy);
    expected[0].config.credentials = ['ada:[redacted]', '[redacted]'];
    expected[1].config.client_secret = '[redacted]';
    expected[2].config.secret = '[redacted]';
    expect(actions(redacted)).toEqual(expected);
  });

  it('keeps a document without secrets as it was, comments included', () => {
    const policy = '# open\non_http_request:\n  - actions: [{type: deny}]\non_http_response:\n';
    expect(redactPolicySecrets(policy)).toBe(policy);
  });

  it('redacts an openid-connect client_secret written as a block scalar', () => {
    const policy =
      'on_http_request:\n  - actions:\n      - type: openid-connect\n        config:\n          issuer_url: https://id.example.com\n          client_id: app\n          client_secret: |\n            multi-line-s3cret\n';
    compilePolicy(policy, 'https');
    const redacted = redactPolicySecrets(policy);
    expect(redacted).not.toContain('multi-line-s3cret');
    expect(parse(redacted).on_http_request[0].actions[0].config.client_secret).toBe('[redacted]');
  });
});
