import { createHmac, timingSafeEqual } from 'node:crypto';

// The signature schemes verify-webhook checks, each as its provider documents it. Each takes
// the secret, the raw body, the request's headers (lower-case names), its public URL and the
// time, and says whether the signature holds. Timestamped schemes refuse signatures older than
// five minutes (the tolerance Stripe, Slack and Standard Webhooks recommend).

export interface SignedRequest {
  secret: string;
  body: Buffer;
  header(name: string): string;
  /** The URL the provider called, as it saw it (Twilio signs it). */
  url: string;
  /** The body's form fields, when it is application/x-www-form-urlencoded. */
  form: [string, string][] | undefined;
  nowMs: number;
}

type Verifier = (r: SignedRequest) => boolean;

const TOLERANCE_S = 300;

const hmac = (algorithm: string, key: string | Buffer, data: string | Buffer) =>
  createHmac(algorithm, key).update(data).digest();

/** Constant-time comparison of a computed MAC with the text the request carried. */
function equal(mac: Buffer, given: string, encoding: 'hex' | 'base64'): boolean {
  const expected = mac.toString(encoding);
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

function fresh(timestampS: string, nowMs: number): boolean {
  const t = Number(timestampS);
  return Number.isInteger(t) && Math.abs(nowMs / 1000 - t) <= TOLERANCE_S;
}

/** GitHub: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(secret, body). */
const github: Verifier = (r) => {
  const sig = r.header('x-hub-signature-256');
  return sig.startsWith('sha256=') && equal(hmac('sha256', r.secret, r.body), sig.slice(7), 'hex');
};

/** Stripe: Stripe-Signature "t=…,v1=…": hex HMAC-SHA256(secret, t + "." + body), t recent. */
const stripe: Verifier = (r) => {
  const parts = r
    .header('stripe-signature')
    .split(',')
    .map((p) => p.trim().split('='));
  const t = parts.find(([k]) => k === 't')?.[1];
  if (t === undefined || !fresh(t, r.nowMs)) return false;
  const mac = hmac('sha256', r.secret, Buffer.concat([Buffer.from(`${t}.`), r.body]));
  return parts.some(([k, v]) => k === 'v1' && v !== undefined && equal(mac, v, 'hex'));
};

/** Slack: X-Slack-Signature "v0=" + hex HMAC-SHA256(secret, "v0:" + timestamp + ":" + body). */
const slack: Verifier = (r) => {
  const t = r.header('x-slack-request-timestamp');
  const sig = r.header('x-slack-signature');
  if (!fresh(t, r.nowMs) || !sig.startsWith('v0=')) return false;
  const mac = hmac('sha256', r.secret, Buffer.concat([Buffer.from(`v0:${t}:`), r.body]));
  return equal(mac, sig.slice(3), 'hex');
};

/** Shopify: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256(secret, body). */
const shopify: Verifier = (r) =>
  equal(hmac('sha256', r.secret, r.body), r.header('x-shopify-hmac-sha256'), 'base64');

/**
 * Twilio: X-Twilio-Signature = base64 HMAC-SHA1(auth token, URL + each POST field's name and
 * value, sorted by name); a JSON body is signed by its SHA-256 in the URL's bodySHA256 instead.
 */
const twilio: Verifier = (r) => {
  const fields = (r.form ?? [])
    .slice()
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => k + v)
    .join('');
  return equal(hmac('sha1', r.secret, r.url + fields), r.header('x-twilio-signature'), 'base64');
};

/**
 * Standard Webhooks (Svix, and the generic HMAC scheme): webhook-signature "v1,<base64>" of
 * HMAC-SHA256(base64-decoded secret after "whsec_", id + "." + timestamp + "." + body).
 */
const svix: Verifier = (r) => {
  const id = r.header('svix-id') || r.header('webhook-id');
  const t = r.header('svix-timestamp') || r.header('webhook-timestamp');
  const sigs = r.header('svix-signature') || r.header('webhook-signature');
  if (id === '' || !fresh(t, r.nowMs)) return false;
  const key = Buffer.from(r.secret.replace(/^whsec_/, ''), 'base64');
  const mac = hmac('sha256', key, Buffer.concat([Buffer.from(`${id}.${t}.`), r.body]));
  return sigs.split(' ').some((s) => s.startsWith('v1,') && equal(mac, s.slice(3), 'base64'));
};

/** The providers by ngrok's identifier. */
export const WEBHOOK_PROVIDERS: ReadonlyMap<string, Verifier> = new Map([
  ['github', github],
  ['stripe', stripe],
  ['slack', slack],
  ['shopify', shopify],
  ['twilio', twilio],
  ['svix', svix],
]);
