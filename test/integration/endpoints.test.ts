import { describe, expect, it } from 'vitest';
import { auditEventsOf, otherAccountClient, useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

let counter = 0;
const uniqueDomain = () => `ep${Date.now().toString(36)}${counter++}.example.com`;

const POLICY = `on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: "hello \${conn.client_ip}"
`;

describe.each(STORES)('/endpoints on $kind', ({ open }) => {
  const t = useTestService(open);

  async function ingress(): Promise<string> {
    const domain = uniqueDomain();
    expect((await t.api('POST', '/agent_ingresses', { domain })).status).toBe(201);
    return domain;
  }

  it("creates a cloud endpoint in ngrok's shape on a name the account holds, with audit events", async () => {
    const domain = await ingress();
    const created = await t.api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://app.${domain}`,
      traffic_policy: POLICY,
      description: 'the landing page',
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^ep_[0-9a-z]{26}$/),
      uri: `${t.service.url}/endpoints/${created.body.id}`,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      description: 'the landing page',
      metadata: '',
      type: 'cloud',
      url: `https://app.${domain}`,
      public_url: `https://app.${domain}`,
      proto: 'https',
      hostport: `app.${domain}:443`,
      traffic_policy: POLICY,
      bindings: ['public'],
    });
    const updated = await t.api('PATCH', `/endpoints/${created.body.id}`, {
      traffic_policy: 'on_http_request:\n  - actions: [{type: deny}]\n',
    });
    expect(updated.status).toBe(200);
    expect(updated.body.traffic_policy).toBe('on_http_request:\n  - actions: [{type: deny}]\n');
    expect((await t.api('DELETE', `/endpoints/${created.body.id}`)).status).toBe(204);
    const events = await auditEventsOf(t.service, created.body.id);
    expect(events.map((e) => e.type)).toEqual([
      'endpoint_created.v0',
      'endpoint_updated.v0',
      'endpoint_deleted.v0',
    ]);
  });

  it('refuses an invalid policy with 400 naming the rule, the action and the position', async () => {
    const domain = await ingress();
    const bad = await t.api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://app.${domain}`,
      traffic_policy:
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a policy's interpolation
        'on_http_request:\n  - name: gate\n    actions:\n      - type: add-headers\n        config:\n          headers:\n            x-a: "${req.nope}"\n',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error_code).toBe('ERR_INVALID_FIELD');
    expect(bad.body.msg).toMatch(
      /^traffic_policy: on_http_request rule 0 \("gate"\) action 0 \(add-headers\) config.headers.x-a at line 1, column 3 \(document line 4\): unknown field 'req.nope'/,
    );
    const unknown = await t.api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://app.${domain}`,
      traffic_policy: 'on_http_request:\n  - actions: [{type: teleport}]\n',
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.msg).toMatch(/action 0 \(teleport\).*unknown action type 'teleport'/);
  });

  it("refuses a hostname the account does not hold; another account's endpoint is 404", async () => {
    const domain = await ingress();
    const other = await otherAccountClient(t.service);
    const taken = await other('POST', '/endpoints', {
      type: 'cloud',
      url: `https://app.${domain}`,
      traffic_policy: POLICY,
    });
    expect(taken.status).toBe(400);
    expect(taken.body.msg).toMatch(/is a name of another account/);
    const mine = await t.api('POST', '/endpoints', {
      type: 'cloud',
      url: `https://x.${domain}`,
      traffic_policy: POLICY,
    });
    expect((await other('GET', `/endpoints/${mine.body.id}`)).status).toBe(404);
    expect((await other('DELETE', `/endpoints/${mine.body.id}`)).status).toBe(404);
  });
});
