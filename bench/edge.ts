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
import { API_KEY, startBenchService } from './lib/pipeline-setup.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median } from './lib/stats.ts';

// Requests/s and p99 through the edge and a reverse SSH tunnel (curl-like client → edge → SSH
// channel → OpenSSH client → local server), and through ngrok's SDK (edge → muxado Proxy stream
// → @ngrok/ngrok in this process → local server), against the same local server reached
// directly, in one run. Every tunneled request also becomes an http_request_complete.v0
// delivered through the 10 subscriptions of bench:pipeline to file destinations. Rounds
// alternate direct, SSH and ngrok. The SDK dials connect.<SERVICE_DOMAIN> (mapped to 127.0.0.1
// in /etc/hosts while the bench runs: run it as root) trusting the CA the service made.

const ROUND_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const HOSTNAME = 'app.bench-edge.example.com';
const NGROK_HOSTNAME = 'sdk.bench-edge.example.com';
const CONNECT_NAME = 'connect.agent-ingress.example';
const BODY = 'x'.repeat(1024);

type Run = { rps: number; p99: number };

/** CPU time (user + system, ms) a process has used so far; Linux's /proc, 10 ms ticks. */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * A tunnel round, with the CPU the service and the ssh client spent per request: on a shared,
 * loaded machine req/s swings with the neighbours, CPU per request much less.
 */
async function tunnelLoad(port: number, host: string, pids: { service: number; ssh: number }) {
  const before = { service: cpuMsOf(pids.service), ssh: cpuMsOf(pids.ssh) };
  const { rps, p99, requests } = await load(port, host);
  const perRequestUs = (pid: number, atStart: number) =>
    ((cpuMsOf(pid) - atStart) * 1000) / requests;
  return {
    rps,
    p99,
    requests,
    serviceUs: perRequestUs(pids.service, before.service),
    sshUs: perRequestUs(pids.ssh, before.ssh),
  };
}

async function load(port: number, host: string) {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/bench`,
    connections: CONNECTIONS,
    duration: ROUND_S,
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

async function main(): Promise<void> {
  const local = createServer((_request, response) => response.end(BODY));
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const localPort = (local.address() as AddressInfo).port;
  const [sshPort, edgePort, agentPort] = [await freePort(), await freePort(), await freePort()];
  const service = await startBenchService({
    SSH_PORT: String(sshPort),
    EDGE_HTTP_PORT: String(edgePort),
    AGENT_PORT: String(agentPort),
  });
  const agent = { kill: async () => {} };
  const unmap = mapToLoopback([CONNECT_NAME]);
  try {
    const api = apiClient(service.url, API_KEY);
    await api('POST', '/agent_ingresses', { domain: 'bench-edge.example.com' });
    const { token } = (await api('POST', '/credentials', {})).body;
    Object.assign(
      agent,
      startSshAgent({ sshPort }, { user: token, hostname: HOSTNAME, localPort }),
    );
    for (let i = 0; ; i++) {
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      if (list.length > 0) break;
      if (i > 200) throw new Error('the agent did not bind');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await ngrok.forward({
      addr: localPort,
      authtoken: token,
      server_addr: `${CONNECT_NAME}:${agentPort}`,
      session_ca_cert: readFileSync(join(service.dataDir, 'agent-tls', 'ca.pem'), 'utf8'),
      domain: NGROK_HOSTNAME,
    });
    const pids = { service: service.pid, ssh: (agent as SshAgent).child.pid! };
    const runs = { direct: [] as Run[], tunnel: [] as Run[], ngrok: [] as Run[] };
    const cpu = {
      serviceUs: [] as number[],
      sshUs: [] as number[],
      ngrokServiceUs: [] as number[],
    };
    for (let round = 0; round < ROUNDS; round++) {
      runs.direct.push(await load(localPort, HOSTNAME));
      const tunneled = await tunnelLoad(edgePort, HOSTNAME, pids);
      runs.tunnel.push(tunneled);
      cpu.serviceUs.push(tunneled.serviceUs);
      cpu.sshUs.push(tunneled.sshUs);
      // The SDK runs in this process: only the service's CPU is its own.
      const viaSdk = await tunnelLoad(edgePort, NGROK_HOSTNAME, { ...pids, ssh: process.pid });
      runs.ngrok.push(viaSdk);
      cpu.ngrokServiceUs.push(viaSdk.serviceUs);
    }
    const rps = (which: keyof typeof runs) => median(runs[which].map((r) => r.rps));
    const p99 = (which: keyof typeof runs) => median(runs[which].map((r) => r.p99));
    process.stdout.write(
      `${CONNECTIONS} connections, ${ROUNDS} × ${ROUND_S} s per path, 1 KiB answers (medians)\n\n`,
    );
    printTable(
      ['path', 'req/s', 'p99 ms'],
      [
        ['direct to the local server', Math.round(rps('direct')), p99('direct')],
        ['edge → SSH tunnel → local server', Math.round(rps('tunnel')), p99('tunnel')],
        ['edge → ngrok SDK (muxado) → local server', Math.round(rps('ngrok')), p99('ngrok')],
      ],
    );
    report(
      {
        bench: 'edge',
        value: Math.round(rps('tunnel')),
        unit: 'req/s',
        baseline: Math.round(rps('direct')),
        ratio: Number((rps('tunnel') / rps('direct')).toFixed(3)),
        spread: spreadOf(runs.tunnel.map((r, i) => r.rps / runs.direct[i].rps)),
      },
      [
        ['p99 ratio (tunnel / direct)', Number((p99('tunnel') / p99('direct')).toFixed(2))],
        ['service CPU per tunneled request, µs', Math.round(median(cpu.serviceUs))],
        ['ssh client CPU per tunneled request, µs', Math.round(median(cpu.sshUs))],
        ['ngrok SDK req/s (edge → muxado → SDK)', Math.round(rps('ngrok'))],
        ['ngrok p99 ratio (SDK / direct)', Number((p99('ngrok') / p99('direct')).toFixed(2))],
        ['service CPU per request through the SDK, µs', Math.round(median(cpu.ngrokServiceUs))],
      ],
    );
  } finally {
    await Promise.race([ngrok.kill().catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    unmap();
    await agent.kill();
    await service.stop();
    local.close();
  }
}

await main();
