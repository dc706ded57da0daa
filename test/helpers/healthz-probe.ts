import { request } from 'node:http';

// Run as its own process (see startHealthzProbe): GET /healthz on a new connection every
// INTERVAL ms for DURATION ms, then one JSON line with each latency (ms; -1: no answer). Apart
// from the process that drives a load, so that the load's own event loop does not inflate them.

const [url, duration, interval] = process.argv.slice(2);

function probe(): Promise<number> {
  const started = performance.now();
  return new Promise((resolve) => {
    const sent = request(`${url}/healthz`, { agent: false, timeout: 5_000 }, (response) => {
      response.resume();
      response.on('end', () =>
        resolve(response.statusCode === 200 ? performance.now() - started : -1),
      );
    });
    sent.on('error', () => resolve(-1));
    sent.on('timeout', () => sent.destroy());
    sent.end();
  });
}

await probe(); // the first request of a fresh process also loads its HTTP client: not counted
process.stdout.write('ready\n');
const latencies: number[] = [];
for (const end = Date.now() + Number(duration); Date.now() < end; ) {
  latencies.push(await probe());
  await new Promise((resolve) => setTimeout(resolve, Number(interval)));
}
process.stdout.write(`${JSON.stringify(latencies)}\n`);
