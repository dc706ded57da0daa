import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type SshAgent, startSshAgent } from '../../test/e2e/agents-helpers.ts';
import { freePort } from '../../test/helpers/free-port.ts';

// bench:edge's baseline: OpenSSH's own server doing what the service does for `ssh -R`, a remote
// forward. Debian's /usr/sbin/sshd on 127.0.0.1 with a config, host key and authorized key of
// its own in a temporary folder, and the same ssh client (same options) the bench's other SSH
// arm runs, forwarding 127.0.0.1:<port> on sshd's side to the same local server.

const SSHD = '/usr/sbin/sshd';
const READY_MS = 30_000;

/** A running sshd with one `ssh -R` client; load goes to 127.0.0.1:`port`. */
export interface SshdForward {
  /** Where sshd listens for the forward's traffic. */
  port: number;
  sshd: ChildProcess;
  client: SshAgent;
  close(): Promise<void>;
}

/** Starts sshd and `ssh -R 127.0.0.1:<port>:127.0.0.1:<localPort>` to it; resolves once it forwards. */
export async function startSshdForward(localPort: number): Promise<SshdForward> {
  const dir = mkdtempSync(join(tmpdir(), 'agin-bench-sshd-'));
  // As root, sshd insists on its privilege separation directory (Debian makes it at boot).
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { mode: 0o755 });
  const keygen = (name: string) =>
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, name)]);
  keygen('host_key');
  keygen('client_key');
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client_key.pub')));
  const [sshPort, port] = [await freePort(), await freePort()];
  writeFileSync(join(dir, 'sshd_config'), sshdConfig(dir, sshPort));
  const sshd = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  sshd.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  let client: SshAgent | undefined;
  const close = async () => {
    await client?.kill();
    if (sshd.exitCode === null && sshd.signalCode === null) {
      const exited = new Promise((resolve) => sshd.once('exit', resolve));
      sshd.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(
      () => log.includes('Server listening on'),
      () => `sshd did not start:\n${log}`,
    );
    client = startSshAgent(
      { sshPort },
      {
        user: userInfo().username,
        hostname: '',
        localPort,
        identity: join(dir, 'client_key'),
        remote: `127.0.0.1:${port}`,
      },
    );
    const forwarding = client;
    await until(
      () => accepts(port),
      () => `the forward did not open:\n${forwarding.output()}\n${log}`,
    );
    return { port, sshd, client, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** sshd's settings: key login of this user only, remote forwards allowed, nothing else. */
function sshdConfig(dir: string, port: number): string {
  return [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${join(dir, 'host_key')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    `AllowUsers ${userInfo().username}`,
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    'AllowTcpForwarding remote',
    // The client names the address to listen on (127.0.0.1), as `ssh -R` through the service does.
    'GatewayPorts clientspecified',
    `PidFile ${join(dir, 'sshd.pid')}`,
    'LogLevel INFO',
    '',
  ].join('\n');
}

/** True once something accepts a connection on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function until(
  ready: () => boolean | Promise<boolean>,
  failure: () => string,
): Promise<void> {
  const deadline = Date.now() + READY_MS;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(failure());
    await sleep(25);
  }
}
