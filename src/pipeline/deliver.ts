import { AppError } from '../errors.ts';
import { BatcherFullError } from './batcher.ts';
import type { Destinations } from './destinations.ts';
import { SpoolFullError } from './spool.ts';
import type { Delivery } from './worker-protocol.ts';

/**
 * The only place that turns destination results into an acknowledgement: resolves when every
 * delivery is durable (written or spooled). A full spool is backpressure (retry later); any
 * other failure is "unavailable". A destination missing from the registry was deleted while the
 * request was routed: its events have nowhere to go and count as delivered.
 */
export async function deliverAll(
  destinations: Destinations,
  deliveries: readonly Delivery[],
): Promise<void> {
  const pending: Promise<void>[] = [];
  for (const delivery of deliveries) {
    const destination = destinations.get(delivery.destinationId);
    if (destination !== undefined) pending.push(destination.deliver(delivery.records));
  }
  const results = await Promise.allSettled(pending);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure === undefined) return;
  const reason = (failure as PromiseRejectedResult).reason;
  if (reason instanceof SpoolFullError || reason instanceof BatcherFullError) {
    throw new AppError(
      'ERR_BACKPRESSURE',
      'a destination cannot take more events now (spool or buffer full); retry later',
      {},
      {
        cause: reason,
      },
    );
  }
  throw new AppError(
    'ERR_UNAVAILABLE',
    'events could not be made durable; retry',
    {},
    { cause: reason },
  );
}
