import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { INGEST_TOKEN, PUBLISH_PATH } from './pipeline-setup.ts';

// Load generators for Publish: closed loop (autocannon, as many requests as the server takes:
// maximum throughput) and open loop (a fixed request rate whatever the server does, latency
// counted from when each request was due, so a stall is not hidden by sending less during it).

const HEADERS = { 'content-type': 'application/proto', authorization: `Bearer ${INGEST_TOKEN}` };

/** Requests per second the server completes with `connections` requests always in flight. */
export async function closedLoop(
  url: string,
  bodies: Buffer[],
  opts: { connections: number; durationS: number },
): Promise<number> {
  const result = await autocannon({
    url,
    connections: opts.connections,
    duration: opts.durationS,
    requests: bodies.map((body) => ({
      method: 'POST',
      path: PUBLISH_PATH,
      headers: HEADERS,
      body,
    })),
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `load against ${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`,
    );
  }
  return result['2xx'] / result.duration;
}

/** What an open-loop run saw. */
export interface OpenLoopResult {
  /** Milliseconds from when each successful request was due to the end of its answer. */
  latencies: number[];
  /** Requests answered with a status other than 200, or that failed. */
  failed: number;
  sent: number;
  /** Requests per second actually completed. */
  achievedRate: number;
}

/**
 * Sends Publish requests at `rate` per second for `durationMs` over keep-alive connections (at
 * most `maxSockets`; beyond that requests queue in the client, and that wait counts), then waits
 * for the last answers. Bodies are used round-robin.
 */
export async function openLoop(
  url: string,
  bodies: Buffer[],
  opts: { rate: number; durationMs: number; maxSockets?: number },
): Promise<OpenLoopResult> {
  const target = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 64 });
  const latencies: number[] = [];
  let failed = 0;
  const pending = new Set<Promise<void>>();

  const send = (body: Buffer, due: number) => {
    const done = new Promise<void>((resolve) => {
      const req = request(
        {
          host: target.hostname,
          port: target.port,
          path: PUBLISH_PATH,
          method: 'POST',
          agent,
          headers: { ...HEADERS, 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.once('end', () => {
            if (res.statusCode === 200) latencies.push(performance.now() - due);
            else failed++;
            resolve();
          });
          res.once('error', () => {
            failed++;
            resolve();
          });
        },
      );
      req.once('error', () => {
        failed++;
        resolve();
      });
      req.end(body);
    });
    pending.add(done);
    done.then(() => pending.delete(done));
  };

  const interval = 1000 / opts.rate;
  const start = performance.now();
  let sent = 0;
  for (;;) {
    const now = performance.now();
    if (now - start >= opts.durationMs) break;
    for (let due = start + sent * interval; due <= now; due = start + sent * interval) {
      send(bodies[sent % bodies.length], due);
      sent++;
    }
    await sleep(Math.max(0, start + sent * interval - performance.now()));
  }
  await Promise.all(pending);
  const elapsed = performance.now() - start;
  agent.destroy();
  return { latencies, failed, sent, achievedRate: (latencies.length / elapsed) * 1000 };
}

/** BENCH_MAX_EVENTS_PER_S, when set: the maximum throughput to take instead of measuring it. */
export function givenMaxEventsPerSecond(): { eventsPerSecond: number; source: string } | undefined {
  const given = Number(process.env.BENCH_MAX_EVENTS_PER_S);
  return given > 0 ? { eventsPerSecond: given, source: 'BENCH_MAX_EVENTS_PER_S' } : undefined;
}

/**
 * The service's maximum events/s for these bodies: BENCH_MAX_EVENTS_PER_S when set, else a
 * closed-loop run (8 connections, as bench:pipeline; BENCH_MAX_S seconds, default 6) after a
 * 2 s warm-up.
 */
export async function maxEventsPerSecond(
  url: string,
  bodies: Buffer[],
  eventsPerRequest: number,
): Promise<{ eventsPerSecond: number; source: string }> {
  const given = givenMaxEventsPerSecond();
  if (given) return given;
  const durationS = Number(process.env.BENCH_MAX_S ?? 6);
  await closedLoop(url, bodies, { connections: 8, durationS: 2 });
  const rps = await closedLoop(url, bodies, { connections: 8, durationS });
  return {
    eventsPerSecond: rps * eventsPerRequest,
    source: `measured: closed loop, 8 connections, ${durationS} s`,
  };
}
