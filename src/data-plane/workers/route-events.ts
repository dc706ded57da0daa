import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import { SlabPool } from '../pipeline/block-slabs.ts';
import { routeRequest } from '../pipeline/route-events.ts';
import { compileRouting, type Routing } from '../pipeline/routing.ts';
import type { RouteResult, RouteTask, RouteWorkerData } from '../pipeline/worker-protocol.ts';

// Piscina worker entry point. Each worker keeps the routing (compiled CEL filters and
// projections) of one configuration version; a task for another version makes it ask for the
// configuration, which the pool sends with the retried task. No database access here.

let routing: Routing | undefined;
// Shared memory for the blocks of the requests in flight (worker-pool.ts gives its bound).
const slabs = new SlabPool((workerData as RouteWorkerData).slabBytes);

// A worker yields the CPU to the ingest thread (nice +10 for this thread; Linux names it in
// /proc/thread-self): when the pool is saturated, the event loop that reads requests, answers
// them and serves /healthz and the REST API still gets the CPU it needs. Elsewhere: as is.
try {
  if (!isMainThread) setPriority(Number(readlinkSync('/proc/thread-self').split('/').at(-1)), 10);
} catch {}

/**
 * Routes one Publish request. A bug in routing is answered as `failed`, so that a task the pool
 * rejects always means trouble with the pool itself (a worker that died or ran out of memory).
 */
export default function routeEvents(task: RouteTask): RouteResult | ReturnType<typeof move> {
  let result: RouteResult;
  try {
    if (task.config !== undefined && routing?.version !== task.config.version) {
      routing = compileRouting(task.config);
    }
    if (routing === undefined || routing.version !== task.version) return { kind: 'need-config' };
    result = routeRequest(routing, task.request, task.receivedAt, task.maxEvents, task.taps, slabs);
  } catch (error) {
    return {
      kind: 'failed',
      message: error instanceof Error ? (error.stack ?? error.message) : String(error),
    };
  }
  if (result.kind !== 'routed') return result;
  // Blocks not in a slab: their buffers are moved to the ingest thread, not copied.
  const buffers = new Set<ArrayBufferLike>([result.response.buffer]);
  for (const delivery of result.deliveries) {
    if (!('parts' in delivery)) continue;
    const { parts } = delivery;
    for (const part of [parts.text, parts.ends, parts.meta, parts.metaEnds])
      buffers.add(part.buffer);
  }
  return move({
    get [transferableSymbol]() {
      return [...buffers];
    },
    get [valueSymbol]() {
      return result;
    },
  });
}
