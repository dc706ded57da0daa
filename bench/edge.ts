import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import ngrok from '@ngrok/ngrok';
import autocannon from 'autocannon';
import { type SshAgent, startSshAgent } from '../test/e2e/agents-helpers.ts';
import { mapToLoopback } from '../test/helpers/etc-hosts.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { apiClient } from '../test/helpers/service.ts';
import { API_KEY, type BenchService, startBenchService } from './lib/pipeline-setup.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { type SshdForward, startSshdForward } from './lib/sshd-forward.ts';
import { median } from './lib/stats.ts';

// Requests/s and p99 of one local server (1 KiB answers) reached four ways, in one run, rounds
// alternating the arms:
// - direct;
// - OpenSSH's own sshd remote forward (`ssh -R 127.0.0.1:P:…` to /usr/sbin/sshd): the baseline,
//   what the service's SSH face does, done by OpenSSH (bench/lib/sshd-forward.ts);
// - `ssh -R` through the service: edge → SSH channel → the same ssh client → local server;
// - ngrok's SDK through the service: edge → muxado Proxy stream → @ngrok/ngrok in this process.
// Every request through the service also becomes an http_request_complete.v0 delivered through
// the 10 subscriptions of bench:pipeline to file destinations. The SDK dials
// connect.<SERVICE_DOMAIN> (mapped to 127.0.0.1 in /etc/hosts while the bench runs: run it as
// root) trusting the CA the service made.

const ROUND_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** Unmeasured load on every arm first: the service's code is compiled before it is timed. */
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const HOSTNAME = 'app.bench-edge.example.com';
const NGROK_HOSTNAME = 'sdk.bench-edge.example.com';
const CONNECT_NAME = 'connect.agent-ingress.example';
const BODY = 'x'.repeat(1024);

const ARMS = {
  direct: 'direct to the local server',
  sshd: "OpenSSH sshd's remote forward (ssh -R), the baseline",
  ssh: 'edge → ssh -R through the service',
  ngrok: 'edge → ngrok SDK (muxado) through the service',
} as const;
type Arm = keyof typeof ARMS;
type Run = { rps: number; p99: number; requests: number };

/** CPU time (user + system, ms) a process has used so far; Linux's /proc, 10 ms ticks. */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function load(port: number, host: string, durationS = ROUND_S): Promise<Run> {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/bench`,
    connections: CONNECTIONS,
    duration: durationS,
    headers: { host },
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`load on port ${port}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  return {
    rps: result['2xx'] / result.duration,
    p99: result.latency.p99,
    requests: result['2xx'],
  };
}

/** Everything the arms need, started: the service, its two agents, sshd and its forward. */
interface Setup {
  localPort: number;
  edgePort: number;
  service: BenchService;
  sshAgent: SshAgent;
  sshd: SshdForward;
}

/** Starts the arms' servers and agents; `cleanups` gets how to stop each, in start order. */
async function startArms(localPort: number, cleanups: (() => Promise<unknown>)[]): Promise<Setup> {
  const [sshPort, edgePort, agentPort] = [await freePort(), await freePort(), await freePort()];
  const service = await startBenchService({
    SSH_PORT: String(sshPort),
    EDGE_HTTP_PORT: String(edgePort),
    AGENT_PORT: String(agentPort),
  });
  cleanups.push(() => service.stop());
  const sshd = await startSshdForward(localPort);
  cleanups.push(() => sshd.close());
  const api = apiClient(service.url, API_KEY);
  await api('POST', '/agent_ingresses', { domain: 'bench-edge.example.com' });
  const { token } = (await api('POST', '/credentials', {})).body;
  const sshAgent = startSshAgent({ sshPort }, { user: token, hostname: HOSTNAME, localPort });
  cleanups.push(() => sshAgent.kill());
  for (let i = 0; ; i++) {
    const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    if (list.length > 0) break;
    if (i > 200) throw new Error(`the ssh agent did not bind:\n${sshAgent.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const unmap = mapToLoopback([CONNECT_NAME]);
  cleanups.push(async () => unmap());
  cleanups.push(() =>
    Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]),
  );
  await ngrok.forward({
    addr: localPort,
    authtoken: token,
    server_addr: `${CONNECT_NAME}:${agentPort}`,
    session_ca_cert: readFileSync(join(service.dataDir, 'agent-tls', 'ca.pem'), 'utf8'),
    domain: NGROK_HOSTNAME,
  });
  return { localPort, edgePort, service, sshAgent, sshd };
}

/** ROUNDS rounds of every arm in turn, with the service's CPU per request where it serves. */
async function measure(setup: Setup) {
  const runs: Record<Arm, Run[]> = { direct: [], sshd: [], ssh: [], ngrok: [] };
  const serviceUs: Record<'ssh' | 'ngrok', number[]> = { ssh: [], ngrok: [] };
  const sshClientUs: number[] = [];
  const pid = { service: setup.service.pid, ssh: setup.sshAgent.child.pid! };
  if (WARMUP_S > 0) {
    for (const [port, host] of [
      [setup.sshd.port, HOSTNAME],
      [setup.edgePort, HOSTNAME],
      [setup.edgePort, NGROK_HOSTNAME],
    ] as const) {
      await load(port, host, WARMUP_S);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    runs.direct.push(await load(setup.localPort, HOSTNAME));
    runs.sshd.push(await load(setup.sshd.port, HOSTNAME));
    for (const [arm, host] of [
      ['ssh', HOSTNAME],
      ['ngrok', NGROK_HOSTNAME],
    ] as const) {
      const before = { service: cpuMsOf(pid.service), ssh: cpuMsOf(pid.ssh) };
      const run = await load(setup.edgePort, host);
      runs[arm].push(run);
      serviceUs[arm].push(((cpuMsOf(pid.service) - before.service) * 1000) / run.requests);
      if (arm === 'ssh') sshClientUs.push(((cpuMsOf(pid.ssh) - before.ssh) * 1000) / run.requests);
    }
  }
  return { runs, serviceUs, sshClientUs };
}

function print({ runs, serviceUs, sshClientUs }: Awaited<ReturnType<typeof measure>>): void {
  const rps = (arm: Arm) => median(runs[arm].map((r) => r.rps));
  const p99 = (arm: Arm) => median(runs[arm].map((r) => r.p99));
  /** The per-round ratios of `arm` to `to`: the spread of one run. */
  const spread = (arm: Arm, to: Arm) => spreadOf(runs[arm].map((r, i) => r.rps / runs[to][i].rps));
  const line = (bench: string, arm: Arm, to: Arm) => ({
    bench,
    value: Math.round(rps(arm)),
    unit: 'req/s',
    baseline: Math.round(rps(to)),
    ratio: spread(arm, to).median,
    spread: spread(arm, to),
  });
  process.stdout.write(
    `${CONNECTIONS} connections, ${ROUNDS} × ${ROUND_S} s per arm, 1 KiB answers (medians; ratio and spread: per round, to sshd's)\n\n`,
  );
  printTable(
    ['arm', 'req/s', 'ratio to sshd', 'spread (min / median / max)', 'p99 ms'],
    (Object.keys(ARMS) as Arm[]).map((arm) => {
      const s = spread(arm, 'sshd');
      return [
        ARMS[arm],
        Math.round(rps(arm)),
        s.median,
        `${s.min} / ${s.median} / ${s.max}`,
        p99(arm),
      ];
    }),
  );
  process.stdout.write('\n');
  // Lines for bench:all: each arm through the service against sshd's, and sshd's against direct.
  process.stdout.write(`${JSON.stringify(line('edge-ngrok', 'ngrok', 'sshd'))}\n`);
  process.stdout.write(`${JSON.stringify(line('edge-sshd', 'sshd', 'direct'))}\n`);
  report(line('edge', 'ssh', 'sshd'), [
    ['service CPU per request, ssh -R arm, µs', Math.round(median(serviceUs.ssh))],
    ['ssh client CPU per request, ssh -R arm, µs', Math.round(median(sshClientUs))],
    ['service CPU per request, ngrok SDK arm, µs', Math.round(median(serviceUs.ngrok))],
  ]);
}

async function main(): Promise<void> {
  const local = createServer((_request, response) => response.end(BODY));
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const cleanups: (() => Promise<unknown>)[] = [async () => local.close()];
  try {
    const setup = await startArms((local.address() as AddressInfo).port, cleanups);
    print(await measure(setup));
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

await main();
