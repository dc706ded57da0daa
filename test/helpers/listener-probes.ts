import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import ssh2 from 'ssh2';

// Probes of the listeners' limits from outside: raw SSH connections that stop after their
// identification, a stock `ssh` with scripted password prompts, an ssh2 agent, and /metrics.

const SSH_MSG_DISCONNECT = 1;

/** A raw connection to the SSH port: what the server said first, and when it closed. */
export interface RawSsh {
  socket: Socket;
  /** The first SSH message's number after the server's identification (1: a disconnect). */
  firstMessage: number;
  /** The disconnect's reason code and text, when the server refused. */
  disconnect?: { code: number; reason: string };
  closed: Promise<number>;
}

/**
 * Connects, sends an identification and nothing more, and reads the server's identification and
 * its first packet (unencrypted): its KEXINIT, or a disconnect.
 */
export function openSsh(port: number, open: Socket[]): Promise<RawSsh> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write('SSH-2.0-Stalled_1.0\r\n'));
    open.push(socket);
    let received = Buffer.alloc(0);
    const closed = new Promise<number>((done) => socket.once('close', () => done(Date.now())));
    socket.on('error', () => {});
    socket.once('close', () => reject(new Error(`closed after ${received.toString('latin1')}`)));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const identEnd = received.indexOf('\r\n');
      const packet = received.subarray(identEnd + 2);
      if (identEnd < 0 || packet.length < 6) return;
      const firstMessage = packet[5];
      if (firstMessage !== SSH_MSG_DISCONNECT) return resolve({ socket, firstMessage, closed });
      const length = packet.readUInt32BE(10);
      if (packet.length < 14 + length) return;
      const disconnect = {
        code: packet.readUInt32BE(6),
        reason: packet.subarray(14, 14 + length).toString('utf8'),
      };
      resolve({ socket, firstMessage, disconnect, closed });
    });
  });
}

/** Runs a stock `ssh` against the service; password prompts are answered by `askpass`. */
export function runSsh(
  port: number,
  user: string,
  options: { askpass?: string; extra?: string[] } = {},
): Promise<{ code: number | null; output: string }> {
  const args = [
    '-p',
    String(port),
    '-F',
    '/dev/null',
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'PubkeyAuthentication=no',
    ...(options.askpass === undefined
      ? ['-o', 'BatchMode=yes']
      : ['-o', 'PreferredAuthentications=password']),
    ...(options.extra ?? []),
    `${user}@127.0.0.1`,
    'true',
  ];
  const env = { ...process.env, SSH_ASKPASS: options.askpass, SSH_ASKPASS_REQUIRE: 'force' };
  const child = spawn('ssh', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
  }
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

/** An agent's ssh2 connection, authenticated with its authtoken as the user name. */
export async function ssh2Agent(port: number, token: string): Promise<ssh2.Client> {
  const client = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve).once('error', reject);
    client.connect({ host: '127.0.0.1', port, username: token });
  });
  return client;
}

/** A counter's value in the service's /metrics (0 when absent). */
export async function metric(url: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith(`${name}${labels} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}
