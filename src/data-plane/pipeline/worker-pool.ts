import { join } from 'node:path';
import { Piscina } from 'piscina';
import { AppError } from '../../shared/errors.ts';
import type { RoutingConfig } from './routing.ts';
import type { TapSpec } from './tap-tee.ts';
import type { RouteResult, RouteTask, RouteWorkerData } from './worker-protocol.ts';

const WORKER_FILE = join(import.meta.dirname, '..', 'workers', 'route-events.ts');

/** The route-events workers and the routing configuration they must apply. */
export interface RoutePool {
  /**
   * Routes one request with the current configuration. Throws ERR_BACKPRESSURE when the queue
   * is full and ERR_UNAVAILABLE when the pool fails the task (a worker died or ran out of
   * memory); a bug in routing is a `failed` result.
   */
  route(
    request: Uint8Array,
    receivedAt: number,
    taps?: readonly TapSpec[],
  ): Promise<Exclude<RouteResult, { kind: 'need-config' }>>;
  /** Makes `config` current: tasks from now on carry its version. */
  setConfig(config: RoutingConfig): void;
  /** Busy fraction of the workers, for metrics. */
  utilization(): number;
  close(): Promise<void>;
}

/**
 * The heap of a worker, MiB: an old generation with room for the largest request's decoded
 * events and records (a few times its bytes) and no more, so that garbage is collected instead
 * of growing the process; a young generation large enough for a typical request's short-lived
 * objects (at 8 MiB they were promoted and throughput fell by a third).
 */
export function workerHeapLimits(maxIngestBytes: number) {
  return {
    maxOldGenerationSizeMb: Math.max(48, Math.ceil((16 * maxIngestBytes) / 2 ** 20)),
    maxYoungGenerationSizeMb: 16,
  };
}

/**
 * A piscina pool of route-events workers. A worker that lacks the current configuration version
 * answers `need-config` and gets the task again with the configuration attached, so a config
 * change costs one extra round per worker and a replaced (crashed) worker catches up by itself.
 */
export function createRoutePool(options: {
  threads: number;
  maxQueue: number;
  /** Events a request may carry (MAX_INGEST_EVENTS). */
  maxEvents: number;
  /** Bytes a request may carry (MAX_INGEST_BYTES): sizes the workers' heaps. */
  maxBytes: number;
  /** Bytes all requests may hold at once (MAX_INFLIGHT_BYTES): bounds each worker's slabs. */
  maxInflightBytes: number;
}): RoutePool {
  const pool = new Piscina<RouteTask, RouteResult>({
    filename: WORKER_FILE,
    minThreads: options.threads,
    maxThreads: options.threads,
    maxQueue: options.maxQueue,
    idleTimeout: Number.POSITIVE_INFINITY,
    resourceLimits: workerHeapLimits(options.maxBytes),
    workerData: { slabBytes: options.maxInflightBytes } satisfies RouteWorkerData,
  });
  // Piscina reports a worker that fails between tasks here; unheard, it would end the process.
  // The pool replaces the worker by itself, so there is nothing else to do.
  pool.on('error', () => {});
  let config: RoutingConfig = { version: 0, subscriptions: [] };

  function run(task: RouteTask): Promise<RouteResult> {
    // Piscina's own check, made here so that a full queue needs no reading of its error text.
    if (pool.queueSize >= options.maxQueue) {
      return Promise.reject(
        new AppError('ERR_BACKPRESSURE', 'too many requests queued; retry later'),
      );
    }
    return pool.run(task).catch((error: unknown) => {
      throw new AppError('ERR_UNAVAILABLE', 'event routing failed; retry', {}, { cause: error });
    });
  }

  return {
    async route(request, receivedAt, taps) {
      const current = config;
      const { maxEvents } = options;
      const task = { version: current.version, request, receivedAt, maxEvents, taps };
      const first = await run(task);
      if (first.kind !== 'need-config') return first;
      const second = await run({ ...task, config: current });
      if (second.kind === 'need-config') {
        return { kind: 'failed', message: 'route-events worker refused its configuration' };
      }
      return second;
    },
    setConfig(next) {
      config = next;
    },
    utilization: () => pool.utilization,
    close: () => pool.close(),
  };
}
