import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Keyring } from '../../shared/secrets.ts';

// Instances relay edge traffic and stop requests to each other over INTERNAL_URL. Each relayed
// request carries one header: its facts (JSON, base64url) and their HMAC-SHA256 under a key
// derived from SECRETS_KEY, which instances sharing a store share (a key of SECRETS_KEY_PREVIOUS
// passes too: instances midway through a rotation). The facts name the instance they are for
// (its random id in the store, new at every start), their time and a random nonce: a header is
// taken once, by that instance, within RELAY_WINDOW_MS (docs/decisions.md#session-owner).

/** The header of a relayed request. */
export const RELAY_HEADER = 'x-agent-ingress-relay';
const PURPOSE = 'agent-ingress instance relay v1';
/** How far a header's time may be from the receiver's clock (instances' clocks must agree). */
export const RELAY_WINDOW_MS = 10_000;
/**
 * Nonces remembered at most: one per header taken in the last window (20,000 relayed requests a
 * second); past it a header is refused until older ones expire, never forgotten early.
 */
const MAX_NONCES = 200_000;

/** What every signed header holds beyond its facts. */
interface Signed {
  to: string;
  at: number;
  nonce: string;
}

/** Signs and checks relay headers. */
export interface RelayAuth {
  /** A header for the instance whose store id is `to`. */
  sign(to: string, facts: object): string;
  /**
   * The facts of a header this service's instances signed for `self` within the window, the
   * first time it is seen; else undefined.
   */
  open<Facts>(header: string | string[] | undefined, self: string): Facts | undefined;
}

/** Relay headers signed with the keyring's relay key. */
export function createRelayAuth(keyring: Keyring, limits = { maxNonces: MAX_NONCES }): RelayAuth {
  const keys = keyring.derive(PURPOSE);
  const mac = (body: string, key = keys[0]) => createHmac('sha256', key).update(body).digest();
  /** Nonces taken, each with when it can no longer pass the window; oldest first. */
  const taken = new Map<string, number>();

  /** Takes a nonce once: false when it was taken, or when the memory is full. */
  function takeOnce(nonce: string, expires: number): boolean {
    const now = Date.now();
    for (const [old, until] of taken) {
      if (until >= now) break;
      taken.delete(old);
    }
    if (taken.has(nonce) || taken.size >= limits.maxNonces) return false;
    taken.set(nonce, expires);
    return true;
  }

  return {
    sign(to, facts) {
      const signed: Signed = { to, at: Date.now(), nonce: randomBytes(12).toString('base64url') };
      const body = Buffer.from(JSON.stringify({ ...facts, ...signed })).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },
    open<Facts>(header: string | string[] | undefined, self: string) {
      if (typeof header !== 'string') return undefined;
      const [body = '', signature = ''] = header.split('.');
      const given = Buffer.from(signature, 'base64url');
      const valid = keys.some((key) => {
        const expected = mac(body, key);
        return given.length === expected.length && timingSafeEqual(given, expected);
      });
      if (!valid) return undefined;
      const facts = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Signed;
      if (facts.to !== self || Math.abs(Date.now() - facts.at) > RELAY_WINDOW_MS) return undefined;
      return takeOnce(facts.nonce, facts.at + RELAY_WINDOW_MS) ? (facts as Facts) : undefined;
    },
  };
}
