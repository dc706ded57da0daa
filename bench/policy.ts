import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { startSshAgent } from '../test/e2e/agents-helpers.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { apiClient } from '../test/helpers/service.ts';
import { API_KEY, startBenchService } from './lib/pipeline-setup.ts';
import { processCpuMs } from './lib/process-cpu.ts';
import { printTable, report } from './lib/report.ts';
import { spreadOf } from './lib/spread.ts';
import { median } from './lib/stats.ts';

// Requests/s through the edge and an SSH tunnel with a five-rule Traffic Policy (basic-auth,
// restrict-ips, rate-limit, add-headers, log) against the same tunnel without a policy, in one
// run: two hostnames of one agent-bound account, rounds alternating. The bar is 0.9.
// Beside req/s, the service's CPU per request (all threads, /proc): on a shared machine req/s
// moves with the neighbours' load, the CPU a request costs much less.

const ROUND_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const WARM_UP_S = 2;
const DOMAIN = 'bench-policy.example.com';
const PLAIN = `plain.${DOMAIN}`;
const GUARDED = `guarded.${DOMAIN}`;
const AUTH = `Basic ${Buffer.from('bench:benchmark password').toString('base64')}`;

const POLICY = `
on_http_request:
  - actions:
      - type: basic-auth
        config: {credentials: ["bench:benchmark password"]}
  - expressions: ["req.method == 'GET'"]
    actions:
      - type: restrict-ips
        config: {allow: [127.0.0.0/8, "::1/128"]}
  - actions:
      - type: rate-limit
        config: {name: all, algorithm: sliding_window, capacity: 100000000, rate: 60s, bucket_key: [conn.client_ip]}
  - actions:
      - type: add-headers
        config: {headers: {x-user: "\${actions.ngrok.basic_auth.credentials.username}"}}
  - actions:
      - type: log
        config: {metadata: {path: "\${req.url.path}"}}
`;

/** One round on one path: requests/s and the service's CPU µs per request. */
interface Round {
  rps: number;
  cpuUs: number;
}

async function load(port: number, host: string, pid: number, seconds = ROUND_S): Promise<Round> {
  const cpuBefore = processCpuMs(pid);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/bench`,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { host, authorization: AUTH },
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`load on ${host}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  const cpuMs = processCpuMs(pid) - cpuBefore;
  return { rps: result['2xx'] / result.duration, cpuUs: (cpuMs * 1000) / result['2xx'] };
}

/** Starts `ssh -R <hostname>:80:…` and waits until it serves. */
async function bind(
  api: ReturnType<typeof apiClient>,
  sshPort: number,
  hostname: string,
  localPort: number,
) {
  const { token } = (await api('POST', '/credentials', {})).body;
  const agent = startSshAgent({ sshPort }, { user: token, hostname, localPort });
  for (let i = 0; ; i++) {
    const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    if (list.some((s: { metadata: string }) => s.metadata === hostname)) return agent;
    if (i > 200) throw new Error(`the agent did not bind ${hostname}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function main(): Promise<void> {
  const local = createServer((_request, response) => response.end('x'.repeat(1024)));
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const localPort = (local.address() as AddressInfo).port;
  const [sshPort, edgePort] = [await freePort(), await freePort()];
  const service = await startBenchService({
    SSH_PORT: String(sshPort),
    EDGE_HTTP_PORT: String(edgePort),
  });
  const agents: { kill(): Promise<void> }[] = [];
  try {
    const api = apiClient(service.url, API_KEY);
    await api('POST', '/agent_ingresses', { domain: DOMAIN });
    const created = await api('POST', '/endpoints', {
      type: 'cloud',
      url: `http://${GUARDED}`,
      traffic_policy: POLICY,
    });
    if (created.status !== 201) throw new Error(`endpoint: ${JSON.stringify(created.body)}`);
    agents.push(
      await bind(api, sshPort, PLAIN, localPort),
      await bind(api, sshPort, GUARDED, localPort),
    );
    // Unmeasured first: a first round pays for JIT compilation of whichever path runs first.
    for (const host of [PLAIN, GUARDED]) await load(edgePort, host, service.pid, WARM_UP_S);
    const plain: Round[] = [];
    const guarded: Round[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      plain.push(await load(edgePort, PLAIN, service.pid));
      guarded.push(await load(edgePort, GUARDED, service.pid));
    }
    const rps = (rounds: Round[]) => median(rounds.map((r) => r.rps));
    const cpu = (rounds: Round[]) => median(rounds.map((r) => r.cpuUs));
    process.stdout.write(
      `${CONNECTIONS} connections, ${ROUNDS} × ${ROUND_S} s per path (medians)\n\n`,
    );
    printTable(
      ['path', 'req/s', 'service CPU µs/request'],
      [
        ['edge → tunnel, no policy', Math.round(rps(plain)), Math.round(cpu(plain))],
        ['edge → tunnel, five-rule policy', Math.round(rps(guarded)), Math.round(cpu(guarded))],
      ],
    );
    const cpuRatio = cpu(guarded) / cpu(plain);
    report(
      {
        bench: 'policy-cpu',
        value: Math.round(cpu(guarded)),
        unit: 'µs/request',
        baseline: Math.round(cpu(plain)),
        ratio: Number(cpuRatio.toFixed(3)),
        spread: spreadOf(guarded.map((g, i) => g.cpuUs / plain[i].cpuUs)),
      },
      [],
    );
    report(
      {
        bench: 'policy',
        value: Math.round(rps(guarded)),
        unit: 'req/s',
        baseline: Math.round(rps(plain)),
        ratio: Number((rps(guarded) / rps(plain)).toFixed(3)),
        spread: spreadOf(guarded.map((g, i) => g.rps / plain[i].rps)),
      },
      [],
    );
  } finally {
    for (const agent of agents) await agent.kill();
    await service.stop();
    local.close();
  }
}

await main();
