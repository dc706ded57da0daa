import { timingSafeEqual } from 'node:crypto';
import { defineAction } from '../action.ts';
import { setResult } from '../exchange.ts';
import type { Template } from '../interpolate.ts';

// basic-auth (RFC 7617): lets through a request whose Authorization carries one of the
// `username:password` credentials (at most 10, passwords of 8 to 128 characters, as ngrok has
// them); any other gets 401 with a Basic challenge for `realm`, unless `enforce` is false.
// basic_auth.decision and .username of the event say what happened.

interface Config {
  credentials: string[];
  realm?: string;
  enforce?: boolean;
}

/** Splits `user:password` at its first colon; undefined when it has none. */
export function splitCredential(text: string): { username: string; password: string } | undefined {
  const colon = text.indexOf(':');
  if (colon < 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** The user and password of a Basic Authorization field, or undefined. */
export function presentedCredentials(
  authorization: string | undefined,
): { username: string; password: string } | undefined {
  const match = /^Basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(authorization ?? '');
  if (match === null) return undefined;
  return splitCredential(Buffer.from(match[1], 'base64').toString('utf8'));
}

function checkCredential(text: string, field: string, fail: (f: string, m: string) => never) {
  const pair = splitCredential(text);
  if (pair === undefined) fail(field, 'a credential is username:password');
  if (pair.username === '') fail(field, 'the username is empty');
  if (pair.password.length < 8 || pair.password.length > 128) {
    fail(field, 'a password has 8 to 128 characters');
  }
}

/** Constant-time equality of two strings (as UTF-8), whatever their lengths. */
function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The most good Authorization values one action remembers (spellings of its credentials). */
const MAX_ACCEPTED = 64;

export const BASIC_AUTH = defineAction<Config>({
  type: 'basic-auth',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['credentials'],
    properties: {
      credentials: {
        type: 'array',
        minItems: 1,
        maxItems: 10,
        items: { type: 'string', maxLength: 1024 },
      },
      realm: { type: 'string', maxLength: 256, pattern: '^[^"\\\\\\r\\n]*$' },
      enforce: { type: 'boolean' },
    },
  },
  compile(config, ctx) {
    const templates: Template[] = config.credentials.map((c, i) => {
      const t = ctx.template(c, `credentials[${i}]`);
      if (t.constant !== undefined) checkCredential(t.constant, `credentials[${i}]`, ctx.fail);
      return t;
    });
    const challenge = `Basic realm="${config.realm ?? 'ngrok'}", charset="UTF-8"`;
    const enforce = config.enforce ?? true;
    // Authorization values found good, with their user: a client repeats its header on every
    // request. Only with constant credentials (a good value stays good), and only good values:
    // anything else, a guess included, is decoded and compared in constant time every time.
    const accepted = templates.every((t) => t.constant !== undefined)
      ? new Map<string, string>()
      : undefined;
    const check = (authorization: string | undefined, values: unknown) => {
      const presented = presentedCredentials(authorization);
      const authorized =
        presented !== undefined &&
        templates.some((t) => {
          const pair = splitCredential(t.render(values));
          return (
            pair !== undefined &&
            same(pair.username, presented.username) &&
            same(pair.password, presented.password)
          );
        });
      if (authorized && accepted !== undefined && accepted.size < MAX_ACCEPTED) {
        accepted.set(authorization!, presented.username);
      }
      return { presented, authorized };
    };
    return (x) => {
      const authorization = x.request?.headers.authorization?.[0];
      const username = authorization === undefined ? undefined : accepted?.get(authorization);
      const { presented, authorized } =
        username === undefined
          ? check(authorization, x.values)
          : { presented: { username }, authorized: true };
      setResult(x, 'basic-auth', {
        credentials: {
          presented: presented !== undefined,
          username: presented?.username ?? '',
          authorized,
        },
      });
      x.decisions.basicAuth = {
        decision: authorized ? 'allow' : 'block',
        username: presented?.username ?? '',
      };
      if (authorized || !enforce) return 'continue';
      x.answer = {
        statusCode: 401,
        headers: { 'www-authenticate': [challenge], 'content-type': ['text/plain'] },
        body: 'Unauthorized\n',
      };
      return 'stop';
    };
  },
});
