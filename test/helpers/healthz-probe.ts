import { readFileSync } from 'node:fs';
import { request } from 'node:http';

// Run as its own process (see startHealthzProbe): GET /healthz on a new connection every
// INTERVAL ms for DURATION ms, then one JSON line with each probe: its latency (ms; -1: no
// answer) and what the service's main thread (PID: the thread that accepts connections, reads
// requests and answers /healthz) did meanwhile, from its scheduler statistics (proc(5),
// /proc/PID/task/PID/schedstat): `cpuMs` on a CPU (work it did, its own or another request's,
// before answering) and `waitMs` runnable but waiting for one (the machine's load). Apart from
// the process that drives a load, so that the load's own event loop does not inflate them.

const [url, duration, interval, pid] = process.argv.slice(2);

/** A probe: wall latency, and the main thread's CPU and run-queue time meanwhile (ms). */
export interface HealthzProbe {
  ms: number;
  cpuMs: number;
  waitMs: number;
}

/** The main thread's time on a CPU and waiting for one, ns. */
function schedstat(): [number, number] {
  const [onCpu, waiting] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ');
  return [Number(onCpu), Number(waiting)];
}

function probe(): Promise<HealthzProbe> {
  const before = schedstat();
  const started = performance.now();
  const done = (ok: boolean): HealthzProbe => {
    const ms = ok ? performance.now() - started : -1;
    const after = schedstat();
    return { ms, cpuMs: (after[0] - before[0]) / 1e6, waitMs: (after[1] - before[1]) / 1e6 };
  };
  return new Promise((resolve) => {
    const sent = request(`${url}/healthz`, { agent: false, timeout: 5_000 }, (response) => {
      const answered = done(response.statusCode === 200); // at once: the thread works on
      response.resume();
      response.on('end', () => resolve(answered));
    });
    sent.on('error', () => resolve(done(false)));
    sent.on('timeout', () => sent.destroy());
    sent.end();
  });
}

await probe(); // the first request of a fresh process also loads its HTTP client: not counted
process.stdout.write('ready\n');
const probes: HealthzProbe[] = [];
for (const end = Date.now() + Number(duration); Date.now() < end; ) {
  probes.push(await probe());
  await new Promise((resolve) => setTimeout(resolve, Number(interval)));
}
process.stdout.write(`${JSON.stringify(probes)}\n`);
