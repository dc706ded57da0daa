import { describe, expect, it } from 'vitest';
import { parseCallerAddress } from '../../src/shared/net/cidr.ts';
import {
  type CompiledRestriction,
  compileRestriction,
  decide,
  type PolicyRule,
  restrictionAllows,
} from '../../src/shared/net/ip-decision.ts';
import {
  type AccountRestrictions,
  createRestrictionCache,
} from '../../src/shared/net/restriction-cache.ts';

const allow = (cidr: string): PolicyRule => ({ cidr, action: 'allow' });
const deny = (cidr: string): PolicyRule => ({ cidr, action: 'deny' });
const at = (text: string) => parseCallerAddress(text);

describe('restrictionAllows (ngrok: some allow matches and no deny matches)', () => {
  const office = compileRestriction('ipx_1', true, [
    allow('110.0.0.0/8'),
    allow('220.12.0.0/16'),
    deny('110.2.3.4/32'),
  ]);

  it('allows an address an allow rule holds', () => {
    expect(restrictionAllows(office, at('110.9.9.9'))).toBe(true);
    expect(restrictionAllows(office, at('220.12.255.1'))).toBe(true);
  });

  it('lets a deny rule win over an allow rule', () => {
    expect(restrictionAllows(office, at('110.2.3.4'))).toBe(false);
  });

  it('refuses an address no rule holds', () => {
    expect(restrictionAllows(office, at('8.8.8.8'))).toBe(false);
    expect(restrictionAllows(office, at('::1'))).toBe(false);
  });

  it('refuses everyone when there are only deny rules, or none (a deleted policy)', () => {
    expect(
      restrictionAllows(compileRestriction('x', true, [deny('10.0.0.0/8')]), at('1.1.1.1')),
    ).toBe(false);
    expect(restrictionAllows(compileRestriction('x', true, []), at('1.1.1.1'))).toBe(false);
  });

  it('refuses a caller without an address', () => {
    expect(restrictionAllows(compileRestriction('x', true, [allow('0.0.0.0/0')]), undefined)).toBe(
      false,
    );
  });
});

describe('decide', () => {
  const loopbackOnly = compileRestriction('ipx_a', true, [allow('127.0.0.1/32')]);
  const notLoopback2 = compileRestriction('ipx_b', true, [allow('0.0.0.0/0'), deny('127.0.0.2')]);
  const warnOnly = compileRestriction('ipx_w', false, [allow('10.0.0.0/8')]);

  it('allows everyone when the account has no restriction', () => {
    expect(decide([], at('203.0.113.9'))).toEqual({ allowed: true, warnings: [] });
  });

  it('needs every enforced restriction to allow, naming the one that refuses', () => {
    expect(decide([loopbackOnly, notLoopback2], at('127.0.0.1'))).toEqual({
      allowed: true,
      warnings: [],
    });
    expect(decide([notLoopback2, loopbackOnly], at('127.0.0.3'))).toMatchObject({
      allowed: false,
      refusedBy: 'ipx_a',
    });
    expect(decide([loopbackOnly, notLoopback2], at('::ffff:127.0.0.2'))).toMatchObject({
      allowed: false,
      refusedBy: 'ipx_a',
    });
  });

  it('never refuses for a restriction that is not enforced, only warns', () => {
    expect(decide([warnOnly], at('127.0.0.1'))).toEqual({ allowed: true, warnings: ['ipx_w'] });
    expect(decide([warnOnly], at('10.1.1.1'))).toEqual({ allowed: true, warnings: [] });
    expect(decide([warnOnly, loopbackOnly], at('127.0.0.1'))).toEqual({
      allowed: true,
      warnings: ['ipx_w'],
    });
  });
});

describe('createRestrictionCache', () => {
  function harness() {
    let clock = 0;
    let loads = 0;
    const state = new Map<string, CompiledRestriction[]>();
    const cache = createRestrictionCache({
      ttlMs: 1000,
      maxAccounts: 2,
      now: () => clock,
      load: async (accountId): Promise<AccountRestrictions> => {
        loads++;
        if (accountId === 'broken') throw new Error('store down');
        return new Map([['api', state.get(accountId) ?? []]]);
      },
    });
    return {
      cache,
      state,
      loads: () => loads,
      advance: (ms: number) => {
        clock += ms;
      },
    };
  }
  const only = (cidr: string) => [compileRestriction('ipx_1', true, [allow(cidr)])];

  it('answers from memory until invalidated, then reads the change', async () => {
    const h = harness();
    h.state.set('acc_1', only('127.0.0.1/32'));
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(false);
    h.state.set('acc_1', only('127.0.0.2/32'));
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(false);
    expect(h.loads()).toBe(1);
    h.cache.invalidate('acc_1');
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(true);
    expect(h.loads()).toBe(2);
  });

  it('reads again once an entry is older than the TTL (a change made by another instance)', async () => {
    const h = harness();
    h.state.set('acc_1', only('127.0.0.1/32'));
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(false);
    h.state.set('acc_1', []);
    h.advance(999);
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(false);
    h.advance(1);
    expect(await h.cache.ipAllowed('acc_1', 'api', '127.0.0.2')).toBe(true);
  });

  it('shares one load between concurrent checks and keeps types apart', async () => {
    const h = harness();
    h.state.set('acc_1', only('127.0.0.1/32'));
    const answers = await Promise.all([
      h.cache.ipAllowed('acc_1', 'api', '127.0.0.2'),
      h.cache.ipAllowed('acc_1', 'agent', '127.0.0.2'),
      h.cache.verdict('acc_1', 'api', '127.0.0.1'),
    ]);
    expect(answers).toEqual([false, true, { allowed: true, warnings: [] }]);
    expect(h.loads()).toBe(1);
  });

  it('decides `invalid` for a type the account does not restrict, else `allow` or `block`', async () => {
    const h = harness();
    h.state.set('acc_1', only('127.0.0.1/32'));
    const decisions = await Promise.all([
      h.cache.ipDecision('acc_1', 'agent', '127.0.0.2'),
      h.cache.ipDecision('acc_1', 'api', '127.0.0.1'),
      h.cache.ipDecision('acc_1', 'api', '127.0.0.2'),
    ]);
    expect(decisions).toEqual(['invalid', 'allow', 'block']);
    // A restriction that is not enforced lets everyone through: the module still ran.
    h.state.set('acc_2', [compileRestriction('ipx_2', false, [allow('10.0.0.0/8')])]);
    expect(await h.cache.ipDecision('acc_2', 'api', '127.0.0.2')).toBe('allow');
  });

  it('does not keep a failed load, and holds at most maxAccounts', async () => {
    const h = harness();
    await expect(h.cache.ipAllowed('broken', 'api', '1.1.1.1')).rejects.toThrow('store down');
    await expect(h.cache.ipAllowed('broken', 'api', '1.1.1.1')).rejects.toThrow('store down');
    expect(h.loads()).toBe(2);
    await h.cache.ipAllowed('a', 'api', '1.1.1.1');
    await h.cache.ipAllowed('b', 'api', '1.1.1.1');
    await h.cache.ipAllowed('c', 'api', '1.1.1.1');
    await h.cache.ipAllowed('a', 'api', '1.1.1.1');
    expect(h.loads()).toBe(6);
  });
});
