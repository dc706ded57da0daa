import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRelayAuth } from '../../src/edge/relay-auth.ts';
import { createKeyring } from '../../src/secrets.ts';

// Relay headers: what one instance signs, another with the same SECRETS_KEY opens; anything
// else (another key, a changed byte, an old header) is refused.

const key = randomBytes(32);
const facts = { kind: 'stop', session: 'ts_1', principal: { accountId: 'ac_1', keyId: 'ak_1' } };

describe('relay headers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens what an instance with the same key signed', () => {
    const header = createRelayAuth(createKeyring(key)).sign(facts);
    expect(createRelayAuth(createKeyring(Buffer.from(key))).open(header)).toMatchObject(facts);
  });

  it('refuses another key, a changed body or signature, and no header', () => {
    const header = createRelayAuth(createKeyring(key)).sign(facts);
    const auth = createRelayAuth(createKeyring(key));
    expect(createRelayAuth(createKeyring(randomBytes(32))).open(header)).toBeUndefined();
    const [body, signature] = header.split('.');
    const changed = Buffer.from(JSON.stringify({ ...facts, session: 'ts_2', at: Date.now() }));
    expect(auth.open(`${changed.toString('base64url')}.${signature}`)).toBeUndefined();
    expect(auth.open(`${body}.${signature.slice(0, -2)}AA`)).toBeUndefined();
    expect(auth.open(`${body}.`)).toBeUndefined();
    expect(auth.open(undefined)).toBeUndefined();
    expect(auth.open([header, header])).toBeUndefined();
  });

  it('accepts a key of SECRETS_KEY_PREVIOUS both ways during a rotation', () => {
    const next = randomBytes(32);
    const rotated = createRelayAuth(createKeyring(next, [key]));
    const notYet = createRelayAuth(createKeyring(key, [next]));
    expect(rotated.open(notYet.sign(facts))).toMatchObject(facts);
    expect(notYet.open(rotated.sign(facts))).toMatchObject(facts);
  });

  it('refuses a header signed more than 30 s before or after', () => {
    const auth = createRelayAuth(createKeyring(key));
    vi.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    const header = auth.sign(facts);
    vi.setSystemTime(Date.parse('2026-01-01T00:00:29Z'));
    expect(auth.open(header)).toMatchObject(facts);
    vi.setSystemTime(Date.parse('2026-01-01T00:00:31Z'));
    expect(auth.open(header)).toBeUndefined();
    vi.setSystemTime(Date.parse('2025-12-31T23:59:29Z'));
    expect(auth.open(header)).toBeUndefined();
  });
});
