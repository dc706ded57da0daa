import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { policyServices, requestExchange, runRequest } from '../helpers/policy-exchange.ts';

// Each provider's request signed the way its documentation tells senders to sign, then checked
// by verify-webhook; the same request with one byte changed is refused.

const SECRET = 'It’s a Secret to Everybody';
const NOW_S = 1_767_000_000;
const hmac = (alg: string, key: string | Buffer, data: string) =>
  createHmac(alg, key).update(data).digest();

interface Signed {
  headers: Record<string, string>;
  body: string;
  target?: string;
  secret?: string;
}

const body = '{"event":"push","id":42}';

const SIGNED: Record<string, Signed> = {
  // docs.github.com: "Validating webhook deliveries" (X-Hub-Signature-256, hex HMAC-SHA256).
  github: {
    body,
    headers: { 'x-hub-signature-256': `sha256=${hmac('sha256', SECRET, body).toString('hex')}` },
  },
  // docs.stripe.com/webhooks: Stripe-Signature t=…,v1=hex HMAC-SHA256 of "t.body".
  stripe: {
    body,
    headers: {
      'stripe-signature': `t=${NOW_S},v1=${hmac('sha256', SECRET, `${NOW_S}.${body}`).toString('hex')}`,
    },
  },
  // api.slack.com/authentication/verifying-requests-from-slack: v0=hex HMAC-SHA256 of "v0:ts:body".
  slack: {
    body,
    headers: {
      'x-slack-request-timestamp': String(NOW_S),
      'x-slack-signature': `v0=${hmac('sha256', SECRET, `v0:${NOW_S}:${body}`).toString('hex')}`,
    },
  },
  // shopify.dev webhooks: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256 of the raw body.
  shopify: {
    body,
    headers: { 'x-shopify-hmac-sha256': hmac('sha256', SECRET, body).toString('base64') },
  },
  // twilio.com/docs/usage/webhooks/webhooks-security: base64 HMAC-SHA1 of URL + sorted name+value.
  twilio: {
    body: 'To=%2B15551234567&From=%2B15557654321&Body=hello',
    target: '/sms?x=1',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': hmac(
        'sha1',
        SECRET,
        'https://app.example.test/sms?x=1Bodyhello' + 'From+15557654321' + 'To+15551234567',
      ).toString('base64'),
    },
  },
  // standardwebhooks.com (Svix): v1,base64 HMAC-SHA256 with the base64 key after whsec_.
  svix: {
    body,
    secret: `whsec_${Buffer.from(SECRET).toString('base64')}`,
    headers: {
      'webhook-id': 'msg_2x',
      'webhook-timestamp': String(NOW_S),
      'webhook-signature': `v1,${hmac('sha256', Buffer.from(SECRET), `msg_2x.${NOW_S}.${body}`).toString('base64')}`,
    },
  },
};

async function verify(provider: string, signed: Signed, tamper = false) {
  const secret = signed.secret ?? SECRET;
  const policy = `on_http_request:\n  - actions:\n      - type: verify-webhook\n        config: {provider: ${provider}, secret: ${JSON.stringify(secret)}}\n`;
  const x = requestExchange(
    { method: 'POST', target: signed.target ?? '/hook', headers: signed.headers },
    policyServices({ now: NOW_S * 1000 + 20_000 }),
  );
  const sent = tamper ? `${signed.body} ` : signed.body;
  x.readBody = async () => Buffer.from(sent);
  return runRequest(policy, x);
}

describe('verify-webhook', () => {
  for (const [provider, signed] of Object.entries(SIGNED)) {
    it(`accepts ${provider}'s documented signature and refuses a changed body`, async () => {
      const good = await verify(provider, signed);
      expect(good.answer).toBeUndefined();
      expect(good.decisions.webhookVerification).toBe('allow');
      expect(good.values.actions.ngrok.verify_webhook).toEqual({ verified: true });
      const bad = await verify(provider, signed, true);
      expect(bad.answer?.statusCode).toBe(403);
      expect(bad.decisions.webhookVerification).toBe('block');
    });
  }

  it('refuses a Stripe signature older than five minutes', async () => {
    const old = NOW_S - 600;
    const signed = {
      body,
      headers: {
        'stripe-signature': `t=${old},v1=${hmac('sha256', SECRET, `${old}.${body}`).toString('hex')}`,
      },
    };
    expect((await verify('stripe', signed)).decisions.webhookVerification).toBe('block');
  });
});
