import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A temp directory for keys and certificates made by OpenSSH's own tools; `remove()` when done. */
export function sshDir(): {
  path: string;
  file(name: string, text?: string): string;
  remove(): void;
} {
  const path = mkdtempSync(join(tmpdir(), 'ssh-test-'));
  return {
    path,
    /** The path of `name` in the dir; writes `text` there first when given. */
    file(name, text) {
      const file = join(path, name);
      if (text !== undefined)
        writeFileSync(file, text.endsWith('\n') ? text : `${text}\n`, { mode: 0o600 });
      return file;
    },
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}

/** Runs `ssh-keygen args` (UTC, so validity prints in UTC) and returns stdout. */
export async function sshKeygen(...args: string[]): Promise<string> {
  const { stdout } = await run('ssh-keygen', args, { env: { ...process.env, TZ: 'UTC' } });
  return stdout;
}

/** Makes a key pair with ssh-keygen; returns the private key path and the public key text. */
export async function keygen(
  dir: string,
  name: string,
  type: string,
  bits?: number,
): Promise<{ path: string; pub: string }> {
  const path = join(dir, name);
  await sshKeygen(
    '-q',
    '-t',
    type,
    ...(bits ? ['-b', String(bits)] : []),
    '-N',
    '',
    '-C',
    `${name}@test`,
    '-f',
    path,
  );
  return { path, pub: readFileSync(`${path}.pub`, 'utf8') };
}

/** `ssh-keygen -lf`'s bits and fingerprint of a key file. */
export async function keygenFingerprint(
  path: string,
): Promise<{ bits: number; fingerprint: string }> {
  const [bits, fingerprint] = (await sshKeygen('-l', '-E', 'sha256', '-f', path)).split(' ');
  return { bits: Number(bits), fingerprint };
}

/** What `ssh-keygen -L` says of a certificate (which it only prints if the signature verifies). */
export interface CertificateListing {
  type: string;
  publicKey: string;
  signingCa: string;
  keyId: string;
  serial: string;
  valid: string;
  principals: string[];
  criticalOptions: string[];
  extensions: string[];
}

/** Runs `ssh-keygen -L -f path` and reads its output into fields. */
export async function listCertificate(path: string): Promise<CertificateListing> {
  const text = await sshKeygen('-L', '-f', path);
  const field = (name: string) => new RegExp(`^\\s+${name}: (.*)$`, 'm').exec(text)?.[1] ?? '';
  const list = (name: string) => {
    const lines = text.split('\n');
    const start = lines.findIndex((line) => line.trim().startsWith(`${name}:`));
    if (start < 0 || lines[start].includes('(none)')) return [];
    const items: string[] = [];
    for (const line of lines.slice(start + 1)) {
      if (!line.startsWith('                ')) break;
      items.push(line.trim());
    }
    return items;
  };
  return {
    type: field('Type'),
    publicKey: field('Public key'),
    signingCa: field('Signing CA'),
    keyId: field('Key ID'),
    serial: field('Serial'),
    valid: field('Valid'),
    principals: list('Principals'),
    criticalOptions: list('Critical Options'),
    extensions: list('Extensions'),
  };
}
