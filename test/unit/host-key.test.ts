import ssh2 from 'ssh2';
import { describe, expect, it } from 'vitest';
import { newHostKey } from '../../src/agent-plane/sessions/host-key.ts';

// ssh2's ed25519 generator makes a key it cannot parse about once in 600 (a leading zero byte of
// the public key dropped): the agent listener then failed to start (seen in CI).
describe('the agent listener’s host key', () => {
  it('is always a key ssh2 parses (3,000 new keys)', () => {
    for (let i = 0; i < 3000; i++) {
      const parsed = ssh2.utils.parseKey(newHostKey());
      expect(parsed).not.toBeInstanceOf(Error);
    }
  });
});
