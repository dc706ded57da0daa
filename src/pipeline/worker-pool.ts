import { join } from 'node:path';
import { Piscina } from 'piscina';
import type { RoutingConfig } from './routing.ts';
import type { RouteResult, RouteTask } from './worker-protocol.ts';

const WORKER_FILE = join(import.meta.dirname, '..', '..', 'workers', 'route-events.ts');

/** The route-events workers and the routing configuration they must apply. */
export interface RoutePool {
  /** Routes one request with the current configuration. */
  route(
    request: Uint8Array,
    receivedAt: number,
  ): Promise<Exclude<RouteResult, { kind: 'need-config' }>>;
  /** Makes `config` current: tasks from now on carry its version. */
  setConfig(config: RoutingConfig): void;
  /** Busy fraction of the workers, for metrics. */
  utilization(): number;
  close(): Promise<void>;
}

/**
 * A piscina pool of route-events workers. A worker that lacks the current configuration version
 * answers `need-config` and gets the task again with the configuration attached, so a config
 * change costs one extra round per worker and a replaced (crashed) worker catches up by itself.
 */
export function createRoutePool(options: { threads: number; maxQueue: number }): RoutePool {
  const pool = new Piscina<RouteTask, RouteResult>({
    filename: WORKER_FILE,
    minThreads: options.threads,
    maxThreads: options.threads,
    maxQueue: options.maxQueue,
    idleTimeout: Number.POSITIVE_INFINITY,
  });
  let config: RoutingConfig = { version: 0, subscriptions: [] };
  return {
    async route(request, receivedAt) {
      const current = config;
      const first = await pool.run({ version: current.version, request, receivedAt });
      if (first.kind !== 'need-config') return first;
      const second = await pool.run({
        version: current.version,
        config: current,
        request,
        receivedAt,
      });
      if (second.kind === 'need-config')
        throw new Error('route-events worker refused its configuration');
      return second;
    },
    setConfig(next) {
      config = next;
    },
    utilization: () => pool.utilization,
    close: () => pool.close(),
  };
}
