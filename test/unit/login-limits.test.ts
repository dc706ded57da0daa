import { describe, expect, it } from 'vitest';
import { dropsStartup } from '../../src/agent-plane/sessions/login-limits.ts';

// The curve of sshd's MaxStartups random early drop, with the random draw given; the listener's
// refusals themselves are tested against the service (test/security/ssh-login-limits.test.ts).

describe('SSH_MAX_STARTUPS', () => {
  it('refuses a new SSH connection at random between start and full, as sshd does', () => {
    const startups = { start: 10, rate: 30, full: 100 };
    expect(dropsStartup(9, startups, () => 0)).toBe(false);
    expect(dropsStartup(100, startups, () => 0.999)).toBe(true);
    // At start, `rate`%; halfway, halfway to 100%.
    expect(dropsStartup(10, startups, () => 0.29)).toBe(true);
    expect(dropsStartup(10, startups, () => 0.3)).toBe(false);
    expect(dropsStartup(55, startups, () => 0.64)).toBe(true);
    expect(dropsStartup(55, startups, () => 0.66)).toBe(false);
  });
});
