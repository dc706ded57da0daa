import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { onFreePort } from './free-port.ts';

// Debian's OpenSSH server, run by a test as the current user on a free 127.0.0.1 port with a
// temp config: host key and host certificate, and user CAs trusted through TrustedUserCAKeys
// only (no authorized_keys, no passwords), so a login proves the certificate alone was accepted.

const SSHD = '/usr/sbin/sshd';
const SETPRIV = '/usr/bin/setpriv';
const START_TIMEOUT_MS = 10_000;
const run = promisify(execFile);

/** A running sshd. */
export interface Sshd {
  port: number;
  /** Everything sshd printed (-e: its log goes to stderr). */
  log(): string;
  close(): Promise<void>;
}

/** Starts sshd in `dir` with the given host key, host certificate and trusted user CA keys. */
export async function startSshd(options: {
  dir: string;
  hostKey: string;
  hostCertificate: string;
  trustedUserCaKeys: string;
}): Promise<Sshd> {
  // As root, sshd insists on its privilege separation directory (Debian makes it at boot).
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { mode: 0o755 });
  // Another process may bind the port between freePort() and sshd's bind: sshd then exits
  // saying so, and starts again on another.
  return onFreePort((port) => startOnPort(port, options));
}

async function startOnPort(port: number, options: Parameters<typeof startSshd>[0]): Promise<Sshd> {
  const config = join(options.dir, 'sshd_config');
  const caFile = join(options.dir, 'trusted_user_ca_keys.pub');
  writeFileSync(caFile, options.trustedUserCaKeys);
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${options.hostKey}`,
      `HostCertificate ${options.hostCertificate}`,
      `TrustedUserCAKeys ${caFile}`,
      'AuthorizedKeysFile none',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'StrictModes no',
      'UsePAM no',
      `PidFile ${join(options.dir, 'sshd.pid')}`,
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  );
  const args = ['-D', '-e', '-f', config];
  const [command, argv] = existsSync(SETPRIV)
    ? [SETPRIV, ['--pdeathsig', 'TERM', SSHD, ...args]]
    : [SSHD, args];
  const child = spawn(command, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  await waitForListening(child, () => output);
  return { port, log: () => output, close: () => stop(child) };
}

async function waitForListening(child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (output().includes('Server listening on')) return;
    if (child.exitCode !== null) throw new Error(`sshd exited during start:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await stop(child);
  throw new Error(`sshd did not listen in ${START_TIMEOUT_MS} ms:\n${output()}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** How one `ssh … command` went. */
export interface Login {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` over ssh as the current user with a key and its certificate, trusting the host
 * only through `@cert-authority` lines in `knownHosts` (no other known_hosts, no config files).
 */
export async function sshLogin(options: {
  port: number;
  dir: string;
  key: string;
  certificate: string;
  knownHosts: string;
  command: string;
  user?: string;
}): Promise<Login> {
  const knownHosts = join(options.dir, `known_hosts_${options.port}`);
  writeFileSync(knownHosts, options.knownHosts);
  const args = [
    '-F',
    'none',
    '-i',
    options.key,
    '-o',
    `CertificateFile=${options.certificate}`,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    `UserKnownHostsFile=${knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=10',
    '-p',
    String(options.port),
    `${options.user ?? userInfo().username}@127.0.0.1`,
    options.command,
  ];
  try {
    const { stdout, stderr } = await run('ssh', args, { timeout: 20_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : -1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}
