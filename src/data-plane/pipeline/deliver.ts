import type { RecordBlock } from '../sinks/record-block.ts';
import type { Destinations } from './destinations.ts';

/** The records one destination must make durable for a request (or an audit batch). */
export interface BlockDelivery {
  destinationId: string;
  block: RecordBlock;
}

/**
 * Hands each delivery to its destination (which turns sink results into acknowledgements, see
 * destination.ts) and resolves when all are durable; the first refusal is the answer. A
 * destination missing from the registry was deleted while the request was routed: its events
 * have nowhere to go and count as delivered.
 */
export async function deliverAll(
  destinations: Destinations,
  deliveries: readonly BlockDelivery[],
): Promise<void> {
  const pending: Promise<unknown>[] = [];
  for (const delivery of deliveries) {
    const destination = destinations.get(delivery.destinationId);
    if (destination !== undefined) pending.push(destination.deliver(delivery.block));
  }
  const results = await Promise.allSettled(pending);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
}
