import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Keyring } from '../secrets.ts';

// Instances relay edge traffic and stop requests to each other over INTERNAL_URL. Each relayed
// request carries one header: its facts (JSON, base64url) and their HMAC-SHA256 under a key
// derived from SECRETS_KEY, which instances sharing a store share (a key of SECRETS_KEY_PREVIOUS
// passes too: instances midway through a rotation). The facts hold their time: a captured
// header is refused once RELAY_WINDOW_MS has passed.

/** The header of a relayed request. */
export const RELAY_HEADER = 'x-agent-ingress-relay';
const PURPOSE = 'agent-ingress instance relay v1';
const RELAY_WINDOW_MS = 30_000;

/** Signs and checks relay headers. */
export interface RelayAuth {
  sign(facts: object): string;
  /** The facts of a header this service's instances signed within the window; else undefined. */
  open<Facts>(header: string | string[] | undefined): Facts | undefined;
}

/** Relay headers signed with the keyring's relay key. */
export function createRelayAuth(keyring: Keyring): RelayAuth {
  const keys = keyring.derive(PURPOSE);
  const mac = (body: string, key = keys[0]) => createHmac('sha256', key).update(body).digest();
  return {
    sign(facts) {
      const body = Buffer.from(JSON.stringify({ ...facts, at: Date.now() })).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },
    open<Facts>(header: string | string[] | undefined) {
      if (typeof header !== 'string') return undefined;
      const [body = '', signature = ''] = header.split('.');
      const given = Buffer.from(signature, 'base64url');
      const signed = keys.some((key) => {
        const expected = mac(body, key);
        return given.length === expected.length && timingSafeEqual(given, expected);
      });
      if (!signed) return undefined;
      const facts = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { at: number };
      return Math.abs(Date.now() - facts.at) <= RELAY_WINDOW_MS ? (facts as Facts) : undefined;
    },
  };
}
