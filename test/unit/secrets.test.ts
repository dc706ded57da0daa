import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createKeyring, loadKeyring } from '../../src/shared/secrets.ts';

const key = () => randomBytes(32);

describe('keyring', () => {
  it('seals with AES-256-GCM under a fresh nonce and opens what it sealed', () => {
    const keyring = createKeyring(key());
    const secret = 'pässwörd-🔑-1234';
    const sealed = keyring.seal(secret);
    expect(sealed).toMatch(/^enc:v1:[A-Za-z0-9_-]{8}:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(secret);
    expect(keyring.seal(secret)).not.toBe(sealed);
    expect(keyring.open(sealed)).toBe(secret);
    expect(keyring.open(keyring.seal(''))).toBe('');
    expect(keyring.stale(sealed)).toBe(false);
  });

  it('refuses a value that was changed', () => {
    const keyring = createKeyring(key());
    const sealed = keyring.seal('secret');
    const body = Buffer.from(sealed.split(':')[3], 'base64url');
    body[body.length - 1] ^= 1;
    const tampered = `${sealed.split(':').slice(0, 3).join(':')}:${body.toString('base64url')}`;
    expect(() => keyring.open(tampered)).toThrow(/does not decrypt/);
  });

  it('opens values of previous keys, calls them stale, and names the missing key otherwise', () => {
    const [oldKey, newKey] = [key(), key()];
    const sealed = createKeyring(oldKey).seal('secret');
    const rotated = createKeyring(newKey, [oldKey]);
    expect(rotated.open(sealed)).toBe('secret');
    expect(rotated.stale(sealed)).toBe(true);
    expect(rotated.stale(rotated.seal('secret'))).toBe(false);
    expect(() => createKeyring(newKey).open(sealed)).toThrow(/SECRETS_KEY_PREVIOUS/);
  });

  it('passes plaintext of earlier versions through, as stale', () => {
    const keyring = createKeyring(key());
    expect(keyring.open('plain-password')).toBe('plain-password');
    expect(keyring.stale('plain-password')).toBe(true);
  });
});

describe('loadKeyring', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('generates DATA_DIR/secrets.key (0600) when SECRETS_KEY is unset, and keeps using it', async () => {
    dir = mkdtempSync(join(tmpdir(), 'keyring-'));
    const config = {
      dataDir: dir,
      databaseUrl: undefined,
      secretsKey: undefined,
      secretsKeyPrevious: [],
    };
    const sealed = (await loadKeyring(config)).seal('secret');
    const file = join(dir, 'secrets.key');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')).toHaveLength(32);
    expect((await loadKeyring(config)).open(sealed)).toBe('secret');
  });

  it('uses SECRETS_KEY when set and writes no file', async () => {
    dir = mkdtempSync(join(tmpdir(), 'keyring-'));
    const secretsKey = key();
    const keyring = await loadKeyring({
      dataDir: dir,
      databaseUrl: undefined,
      secretsKey,
      secretsKeyPrevious: [],
    });
    expect(createKeyring(secretsKey).open(keyring.seal('secret'))).toBe('secret');
    expect(() => statSync(join(dir, 'secrets.key'))).toThrow();
  });
});
