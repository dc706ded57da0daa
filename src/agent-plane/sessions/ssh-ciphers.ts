import { createRequire } from 'node:module';
import type { CipherAlgorithm } from 'ssh2';

/**
 * The ciphers the agent listener offers. The client's order picks among the ciphers both sides
 * have, so leaving chacha20-poly1305@openssh.com out is what makes OpenSSH (which lists it first)
 * choose AES. ssh2 runs its ciphers in JavaScript unless its native binding was built (its
 * install script, see sshCryptoIsNative): ChaCha20-Poly1305 there creates three cipher objects
 * per packet plus a Poly1305 in WebAssembly, where AES-CTR creates one HMAC and AES-GCM one
 * cipher, and on Node 24 each creation from a raw key costs tens of µs. Natively, AES with the
 * CPU's AES instructions is the cheaper one too. AES-GCM and AES-CTR with an encrypt-then-MAC
 * are what OpenSSH itself offers after ChaCha20; every SSH client in use supports them.
 */
export const AGENT_CIPHERS: CipherAlgorithm[] = [
  'aes128-gcm@openssh.com',
  'aes256-gcm@openssh.com',
  'aes128-ctr',
  'aes192-ctr',
  'aes256-ctr',
];

/**
 * Whether ssh2 encrypts with its native binding (sshcrypto.node, which its install script
 * builds with node-gyp when a C++ toolchain is there) rather than in JavaScript.
 */
export function sshCryptoIsNative(): boolean {
  const crypto = createRequire(import.meta.url)('ssh2/lib/protocol/crypto.js');
  return crypto.bindingAvailable === true;
}
