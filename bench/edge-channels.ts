import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type SshAgent, startSshAgent } from '../test/e2e/agents-helpers.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { apiClient } from '../test/helpers/service.ts';
import { API_KEY, startBenchService } from './lib/pipeline-setup.ts';
import { printTable } from './lib/report.ts';
import { percentile } from './lib/stats.ts';

// What a fresh SSH channel costs a request against a pooled one: the price of the edge closing
// channels idle for FREE_CHANNEL_IDLE_MS (docs/decisions.md#channel-pool). One client, one
// request at a time, through the edge and a reverse SSH tunnel; blocks alternate between a path
// the local server keeps alive (the edge reuses its channel) and one it answers with
// `Connection: close` (the edge opens a channel per request).

const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 6);
const PER_BLOCK = 50;
const HOSTNAME = 'app.bench-channels.example.com';

async function main(): Promise<void> {
  const local = createServer((req, res) => {
    if (req.url === '/close') res.setHeader('connection', 'close');
    res.end('x'.repeat(1024));
  });
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const [sshPort, edgePort] = [await freePort(), await freePort()];
  const service = await startBenchService({
    SSH_PORT: String(sshPort),
    EDGE_HTTP_PORT: String(edgePort),
  });
  const client = new Agent({ keepAlive: true, maxSockets: 1 });
  let agent: SshAgent | undefined;
  try {
    const api = apiClient(service.url, API_KEY);
    await api('POST', '/agent_ingresses', { domain: 'bench-channels.example.com' });
    const { token } = (await api('POST', '/credentials', {})).body;
    const localPort = (local.address() as AddressInfo).port;
    agent = startSshAgent({ sshPort }, { user: token, hostname: HOSTNAME, localPort });
    for (let i = 0; (await api('GET', '/tunnel_sessions')).body.tunnel_sessions.length === 0; i++) {
      if (i > 200) throw new Error('the agent did not bind');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    /** One request's latency, ms. */
    const once = (path: string) =>
      new Promise<number>((resolve, reject) => {
        const started = process.hrtime.bigint();
        const headers = { host: HOSTNAME };
        request({ host: '127.0.0.1', port: edgePort, path, agent: client, headers }, (answer) => {
          answer.resume();
          answer.on('end', () => resolve(Number(process.hrtime.bigint() - started) / 1e6));
        })
          .on('error', reject)
          .end();
      });
    const samples = { pooled: [] as number[], fresh: [] as number[] };
    for (let block = 0; block < BLOCKS; block++) {
      await once('/keep'); // opens the channel the block then reuses
      for (let i = 0; i < PER_BLOCK; i++) samples.pooled.push(await once('/keep'));
      for (let i = 0; i < PER_BLOCK; i++) samples.fresh.push(await once('/close'));
    }
    const row = (name: string, values: number[]) => [
      name,
      percentile(values, 50).toFixed(2),
      percentile(values, 90).toFixed(2),
    ];
    process.stdout.write(`${BLOCKS * PER_BLOCK} requests per path, one at a time\n\n`);
    printTable(
      ['channel', 'median ms', 'p90 ms'],
      [row('pooled (reused)', samples.pooled), row('fresh (opened)', samples.fresh)],
    );
  } finally {
    await agent?.kill();
    await service.stop();
    client.destroy();
    local.close();
  }
}

await main();
