import type { Destinations } from './destinations.ts';
import type { Delivery } from './worker-protocol.ts';

/**
 * Hands each delivery to its destination (which turns sink results into acknowledgements, see
 * destination.ts) and resolves when all are durable; the first refusal is the answer. A
 * destination missing from the registry was deleted while the request was routed: its events
 * have nowhere to go and count as delivered.
 */
export async function deliverAll(
  destinations: Destinations,
  deliveries: readonly Delivery[],
): Promise<void> {
  const pending: Promise<unknown>[] = [];
  for (const delivery of deliveries) {
    const destination = destinations.get(delivery.destinationId);
    if (destination !== undefined) pending.push(destination.deliver(delivery.records));
  }
  const results = await Promise.allSettled(pending);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
}
