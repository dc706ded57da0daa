import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.ts';

// Debian's pebble (Let's Encrypt's test ACME server) on a free port, validating DNS-01 against
// the given DNS server. The package ships no TLS certificate for its listener, so each start
// makes a CA and a 127.0.0.1 certificate with openssl; `caFile` is that CA, for the ACME client.
// setpriv --pdeathsig: pebble dies with the test process.

/** A running pebble. */
export interface Pebble {
  directoryUrl: string;
  caFile: string;
  /** The root pebble issues under (made at each start): what a client of an issued certificate trusts. */
  issuingRoot(): Promise<string>;
  log(): string;
  /** Stops it (for "ACME server down"); `start()` brings it back on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

function makeCertificates(dir: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=test pebble CA',
  ]);
  openssl(dir, ['req', ...ec, '-keyout', 'key.pem', '-out', 'req.csr', '-subj', '/CN=localhost']);
  writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'req.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'cert.pem',
    '-days',
    '2',
    '-extfile',
    'ext',
  ]);
}

/** GET `url`'s body, trusting `ca`. */
function fetchText(url: string, ca: Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: ca }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(body) : reject(new Error(`${url}: ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

function directoryAnswers(url: string, ca: Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { agent: ca }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** Starts pebble with `-dnsserver 127.0.0.1:<dnsPort>`. */
export async function startPebble(dnsPort: number): Promise<Pebble> {
  const dir = mkdtempSync(join(tmpdir(), 'agin-pebble-'));
  makeCertificates(dir);
  const port = await freePort();
  const managementPort = await freePort();
  const config = {
    pebble: {
      listenAddress: `127.0.0.1:${port}`,
      managementListenAddress: `127.0.0.1:${managementPort}`,
      certificate: join(dir, 'cert.pem'),
      privateKey: join(dir, 'key.pem'),
      httpPort: await freePort(),
      tlsPort: await freePort(),
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
    },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const directoryUrl = `https://127.0.0.1:${port}/dir`;
  const agent = new Agent({ ca: readFileSync(join(dir, 'ca.pem')) });
  let child: ChildProcess | undefined;
  let log = '';
  async function start(): Promise<void> {
    const args = ['--pdeathsig', 'KILL', '/usr/bin/pebble', '-config', join(dir, 'config.json')];
    child = spawn('setpriv', [...args, '-dnsserver', `127.0.0.1:${dnsPort}`], {
      // No sleeps before validating, no bad nonces, a fresh authorization every order.
      env: {
        ...process.env,
        PEBBLE_VA_NOSLEEP: '1',
        PEBBLE_WFE_NONCEREJECT: '0',
        PEBBLE_AUTHZREUSE: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk) => (log += chunk));
    child.stderr!.on('data', (chunk) => (log += chunk));
    for (let i = 0; i < 100; i++) {
      if (await directoryAnswers(directoryUrl, agent)) return;
      if (child.exitCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`pebble did not start:\n${log}`);
  }
  async function stop(): Promise<void> {
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  await start();
  return {
    directoryUrl,
    caFile: join(dir, 'ca.pem'),
    // pebble's management interface serves the root of its current chain.
    issuingRoot: () => fetchText(`https://127.0.0.1:${managementPort}/roots/0`, agent),
    log: () => log,
    stop,
    start,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
