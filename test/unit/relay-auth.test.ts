import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRelayAuth, RELAY_WINDOW_MS } from '../../src/agent-plane/edge/relay-auth.ts';
import { createKeyring } from '../../src/shared/secrets.ts';

// Relay headers: what one instance signs for another with the same SECRETS_KEY, that one opens,
// once; anything else (another key, a changed byte, an old header, another instance, a second
// use) is refused.

const key = randomBytes(32);
const facts = { kind: 'stop', session: 'ts_1', principal: { accountId: 'ac_1', keyId: 'ak_1' } };
const OWNER = 'inst_owner';

describe('relay headers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens what an instance with the same key signed for it', () => {
    const header = createRelayAuth(createKeyring(key)).sign(OWNER, facts);
    expect(createRelayAuth(createKeyring(Buffer.from(key))).open(header, OWNER)).toMatchObject(
      facts,
    );
  });

  it('refuses another key, a changed body or signature, and no header', () => {
    const header = createRelayAuth(createKeyring(key)).sign(OWNER, facts);
    const auth = createRelayAuth(createKeyring(key));
    expect(createRelayAuth(createKeyring(randomBytes(32))).open(header, OWNER)).toBeUndefined();
    const [body, signature] = header.split('.');
    const changed = Buffer.from(JSON.stringify({ ...facts, session: 'ts_2', at: Date.now() }));
    expect(auth.open(`${changed.toString('base64url')}.${signature}`, OWNER)).toBeUndefined();
    expect(auth.open(`${body}.${signature.slice(0, -2)}AA`, OWNER)).toBeUndefined();
    expect(auth.open(`${body}.`, OWNER)).toBeUndefined();
    expect(auth.open(undefined, OWNER)).toBeUndefined();
    expect(auth.open([header, header], OWNER)).toBeUndefined();
  });

  it('accepts a key of SECRETS_KEY_PREVIOUS both ways during a rotation', () => {
    const next = randomBytes(32);
    const rotated = createRelayAuth(createKeyring(next, [key]));
    const notYet = createRelayAuth(createKeyring(key, [next]));
    expect(rotated.open(notYet.sign(OWNER, facts), OWNER)).toMatchObject(facts);
    expect(notYet.open(rotated.sign(OWNER, facts), OWNER)).toMatchObject(facts);
  });

  it('refuses a header signed more than 10 s before or after', () => {
    expect(RELAY_WINDOW_MS).toBe(10_000);
    const auth = createRelayAuth(createKeyring(key));
    vi.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    const [late, later, early] = [1, 2, 3].map(() => auth.sign(OWNER, facts));
    vi.setSystemTime(Date.parse('2026-01-01T00:00:09Z'));
    expect(auth.open(late, OWNER)).toMatchObject(facts);
    vi.setSystemTime(Date.parse('2026-01-01T00:00:11Z'));
    expect(auth.open(later, OWNER)).toBeUndefined();
    vi.setSystemTime(Date.parse('2025-12-31T23:59:49Z'));
    expect(auth.open(early, OWNER)).toBeUndefined();
  });

  it('takes a header once, and only on the instance it was signed for', () => {
    const auth = createRelayAuth(createKeyring(key));
    const header = auth.sign(OWNER, facts);
    expect(auth.open(header, 'inst_other')).toBeUndefined();
    expect(auth.open(header, OWNER)).toMatchObject(facts);
    expect(auth.open(header, OWNER)).toBeUndefined();
    // Two headers for the same facts are two requests: each passes once.
    expect(auth.open(auth.sign(OWNER, facts), OWNER)).toMatchObject(facts);
  });

  it('remembers a bounded number of headers, each until the window has passed', () => {
    vi.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    const auth = createRelayAuth(createKeyring(key), { maxNonces: 3 });
    for (let i = 0; i < 3; i += 1) expect(auth.open(auth.sign(OWNER, facts), OWNER)).toBeDefined();
    const waiting = auth.sign(OWNER, facts);
    expect(auth.open(waiting, OWNER)).toBeUndefined();
    vi.setSystemTime(Date.parse('2026-01-01T00:00:10.001Z'));
    expect(auth.open(auth.sign(OWNER, facts), OWNER)).toMatchObject(facts);
  });
});
