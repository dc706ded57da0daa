import type { Metrics } from '../../shared/metrics.ts';
import type { Sink } from '../sinks/types.ts';
import { SinkError } from '../sinks/types.ts';
import type { DestinationCounts } from './account-stats.ts';
import type { Spool } from './spool.ts';

/**
 * A sink that records batch size, write latency, delivered records and errors: in the metrics,
 * and in its destination's own `counts` (its account's stats).
 */
export function instrumentSink(
  sink: Sink,
  kind: string,
  metrics: Metrics,
  counts: DestinationCounts,
): Sink {
  return {
    async write(batch) {
      const stop = metrics.sinkWriteSeconds.startTimer({ sink: kind });
      try {
        await sink.write(batch);
        metrics.recordsDelivered.inc({ sink: kind }, batch.count);
        counts.delivered += batch.count;
        metrics.batchRecords.observe({ sink: kind }, batch.count);
      } catch (error) {
        const retriable = !(error instanceof SinkError) || error.retriable;
        metrics.sinkErrors.inc({ sink: kind, retriable: String(retriable) });
        counts.errors++;
        throw error;
      } finally {
        stop();
      }
    },
    close: () => sink.close(),
  };
}

/** A spool that counts the records appended to it. */
export function instrumentSpool(
  spool: Spool,
  kind: string,
  metrics: Metrics,
  counts: DestinationCounts,
): Spool {
  const append = spool.append.bind(spool);
  return Object.assign(spool, {
    async append(batch: Parameters<Spool['append']>[0]) {
      const seq = await append(batch);
      metrics.recordsSpooled.inc({ sink: kind }, batch.count);
      counts.spooled += batch.count;
      return seq;
    },
  });
}
