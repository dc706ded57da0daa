import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestService } from '../helpers/service.ts';
import { curl, type SshAgent } from './agents-helpers.ts';
import { boundAgent, eventsOf, trafficEvents } from './edge-helpers.ts';

// The decisions of a cloud endpoint's policy that refuse traffic, through the edge with curl to
// an `ssh -R` agent: restrict-ips with the account's IP policies, circuit-breaker, verify-webhook
// (GitHub and Stripe signatures made as they document) and rate-limit. Each answer, and the
// http_request_complete.v0 field that reports the decision. One endpoint, its rules chosen by
// path; curl comes from 127.0.0.1.

const DOMAIN = 'edge-decisions.example.com';
const HOST = `app.${DOMAIN}`;
const GITHUB_SECRET = 'It is a truth universally acknowledged';
const STRIPE_SECRET = 'whsec_a single man in possession';

function policy(allowLoopback: string, excludeLoopback: string): string {
  return `
on_http_request:
  - expressions: ["req.url.path.startsWith('/ips/allow')"]
    actions:
      - type: restrict-ips
        config: {ip_policies: [${allowLoopback}]}
  - expressions: ["req.url.path.startsWith('/ips/deny')"]
    actions:
      - type: restrict-ips
        config: {ip_policies: [${excludeLoopback}]}
  - expressions: ["req.url.path.startsWith('/breaker/')"]
    actions:
      - type: circuit-breaker
        config: {error_threshold: 0.5, volume_threshold: 4, window_duration: 60s, tripped_duration: 60s}
  - expressions: ["req.url.path.startsWith('/hooks/github')"]
    actions:
      - type: verify-webhook
        config: {provider: github, secret: "${GITHUB_SECRET}"}
  - expressions: ["req.url.path.startsWith('/hooks/stripe')"]
    actions:
      - type: verify-webhook
        config: {provider: stripe, secret: "${STRIPE_SECRET}"}
  - expressions: ["req.url.path.startsWith('/limited/')"]
    actions:
      - type: rate-limit
        config:
          name: per client
          algorithm: sliding_window
          capacity: 3
          rate: 60s
          bucket_key: [conn.client_ip]
`;
}

/** The decisions no rule here makes, as the event says them when their module did not run. */
const NOT_RUN = {
  basic_auth: { decision: 'invalid', username: '' },
  circuit_breaker: { decision: 'invalid' },
  ip_policy: { decision: 'invalid' },
  webhook_verification: { decision: 'invalid' },
};

/** The event's decision fields. */
const decisionsOf = (event: any) => ({
  basic_auth: event.basic_auth,
  circuit_breaker: event.circuit_breaker,
  ip_policy: event.ip_policy,
  webhook_verification: event.webhook_verification,
});

const hmacHex = (secret: string, data: string) =>
  createHmac('sha256', secret).update(data).digest('hex');

/** One byte of `text` changed. */
const tampered = (text: string) => text.replace('"opened"', '"openeD"');

describe("the edge's refusing decisions, through curl", () => {
  const ctx = useTestService();
  let agent: SshAgent;
  let local: Server;
  let events: () => any[];
  /** The paths the agent's server received. */
  const reached: string[] = [];

  const post = (path: string, body: string, headers: string[]) =>
    curl(ctx.service.edgePort!, HOST, path, [
      '-X',
      'POST',
      '-H',
      'Content-Type: application/json',
      ...headers.flatMap((h) => ['-H', h]),
      '--data-binary',
      body,
    ]);

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    const ipPolicy = async (rules: { cidr: string; action: string }[]) => {
      const created = await ctx.api('POST', '/ip_policies', {});
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      for (const rule of rules) {
        const r = await ctx.api('POST', '/ip_policy_rules', {
          ...rule,
          ip_policy_id: created.body.id,
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
      }
      return created.body.id as string;
    };
    const allowLoopback = await ipPolicy([{ cidr: '127.0.0.1/32', action: 'allow' }]);
    const excludeLoopback = await ipPolicy([
      { cidr: '0.0.0.0/0', action: 'allow' },
      { cidr: '127.0.0.1/32', action: 'deny' },
    ]);
    events = await trafficEvents(ctx, 'decisions');
    local = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        reached.push(request.url ?? '');
        const status = request.url?.startsWith('/breaker/fail') ? 500 : 200;
        const body = Buffer.concat(chunks).toString();
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ url: request.url, body }));
      });
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    agent = await boundAgent(ctx, HOST, (local.address() as AddressInfo).port);
    const created = await ctx.api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${HOST}`,
      traffic_policy: policy(allowLoopback, excludeLoopback),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await agent?.kill();
    local?.close();
  });

  it("restrict-ips with the account's IP policies: 127.0.0.1 allowed by one, refused by the other", async () => {
    const allowed = await curl(ctx.service.edgePort!, HOST, '/ips/allow');
    expect(allowed.status).toBe(200);
    const [allowEvent] = await eventsOf(events, '/ips/allow');
    expect(decisionsOf(allowEvent)).toEqual({ ...NOT_RUN, ip_policy: { decision: 'allow' } });

    const denied = await curl(ctx.service.edgePort!, HOST, '/ips/deny');
    expect(denied.status).toBe(403);
    expect(denied.body).toBe('Your IP address is not allowed to reach this endpoint.\n');
    const [denyEvent] = await eventsOf(events, '/ips/deny');
    expect(decisionsOf(denyEvent)).toEqual({ ...NOT_RUN, ip_policy: { decision: 'block' } });
    expect(denyEvent.http.response).toMatchObject({
      status_code: 403,
      body_length: denied.body.length,
      headers: { 'Content-Type': ['text/plain'] },
    });
    expect(reached).toContain('/ips/allow');
    expect(reached).not.toContain('/ips/deny');
  });

  it('circuit-breaker: opens after the upstream answers 5xx, then answers 503 itself', async () => {
    for (let i = 1; i <= 4; i++) {
      expect((await curl(ctx.service.edgePort!, HOST, `/breaker/fail${i}`)).status).toBe(500);
    }
    for (let i = 1; i <= 4; i++) {
      const [event] = await eventsOf(events, `/breaker/fail${i}`);
      expect(decisionsOf(event)).toEqual({ ...NOT_RUN, circuit_breaker: { decision: 'allow' } });
      expect(event.http.response.status_code).toBe(500);
    }
    const open = await curl(ctx.service.edgePort!, HOST, '/breaker/ok');
    expect(open.status).toBe(503);
    expect(open.body).toBe('Service Unavailable: the circuit breaker is open.\n');
    const [event] = await eventsOf(events, '/breaker/ok');
    expect(decisionsOf(event)).toEqual({ ...NOT_RUN, circuit_breaker: { decision: 'block' } });
    expect(event.http.response.status_code).toBe(503);
    expect(reached).not.toContain('/breaker/ok');
  });

  it('verify-webhook: a GitHub delivery signed as GitHub documents passes with its body; one byte changed is refused', async () => {
    const body = JSON.stringify({ action: 'opened', number: 26 });
    // X-Hub-Signature-256: "sha256=" + hex HMAC-SHA256 of the payload with the webhook secret.
    const signature = `X-Hub-Signature-256: sha256=${hmacHex(GITHUB_SECRET, body)}`;
    const good = await post('/hooks/github/1', body, [signature, 'X-GitHub-Event: issues']);
    expect(good.status).toBe(200);
    expect(JSON.parse(good.body)).toEqual({ url: '/hooks/github/1', body });
    const bad = await post('/hooks/github/2', tampered(body), [signature]);
    expect(bad.status).toBe(403);
    const [goodEvent] = await eventsOf(events, '/hooks/github/1');
    expect(decisionsOf(goodEvent)).toEqual({
      ...NOT_RUN,
      webhook_verification: { decision: 'allow' },
    });
    const [badEvent] = await eventsOf(events, '/hooks/github/2');
    expect(decisionsOf(badEvent)).toEqual({
      ...NOT_RUN,
      webhook_verification: { decision: 'block' },
    });
    expect(badEvent.http.response.status_code).toBe(403);
    expect(reached).not.toContain('/hooks/github/2');
  });

  it('verify-webhook: a Stripe event signed as Stripe documents passes; one byte changed is refused', async () => {
    const body = JSON.stringify({
      id: 'evt_1',
      type: 'invoice.opened',
      data: { status: 'opened' },
    });
    // Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<payload>">.
    const t = Math.floor(Date.now() / 1000);
    const signature = `Stripe-Signature: t=${t},v1=${hmacHex(STRIPE_SECRET, `${t}.${body}`)}`;
    const good = await post('/hooks/stripe/1', body, [signature]);
    expect(good.status).toBe(200);
    expect(JSON.parse(good.body)).toEqual({ url: '/hooks/stripe/1', body });
    const bad = await post('/hooks/stripe/2', tampered(body), [signature]);
    expect(bad.status).toBe(403);
    const [goodEvent] = await eventsOf(events, '/hooks/stripe/1');
    expect(goodEvent.webhook_verification).toEqual({ decision: 'allow' });
    const [badEvent] = await eventsOf(events, '/hooks/stripe/2');
    expect(decisionsOf(badEvent)).toEqual({
      ...NOT_RUN,
      webhook_verification: { decision: 'block' },
    });
    expect(reached).not.toContain('/hooks/stripe/2');
  });

  it('rate-limit: the fourth request within the window is a 429 with Retry-After', async () => {
    for (let i = 1; i <= 3; i++) {
      expect((await curl(ctx.service.edgePort!, HOST, `/limited/${i}`)).status).toBe(200);
    }
    const limited = await curl(ctx.service.edgePort!, HOST, '/limited/4');
    expect(limited.status).toBe(429);
    expect(limited.headers).toMatch(/^retry-after: \d+$/im);
    const [event] = await eventsOf(events, '/limited/4');
    expect(event.http.response.status_code).toBe(429);
    expect(Object.keys(event.http.response.headers)).toContain('Retry-After');
    expect(decisionsOf(event)).toEqual(NOT_RUN);
    expect(reached).not.toContain('/limited/4');
  });
});
