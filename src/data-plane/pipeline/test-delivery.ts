import { DESTINATION_TEST_EVENT_TYPE } from '../../catalogue/event-types.ts';
import { newId } from '../../shared/ids.ts';
import { type EventRecord, RecordBlock } from '../sinks/record-block.ts';
import type { Destinations } from './destinations.ts';

/**
 * What a test delivery did, as the destination's receipt says: `durable` when the event was
 * written or spooled (as for any event), `delivered` only when the target itself took it;
 * `error` says why not, when it did not.
 */
export interface TestDelivery {
  eventId: string;
  durable: boolean;
  delivered: boolean;
  error: string | null;
}

/** The test event's envelope (docs/decisions.md#envelope): no principal, as it changes no account object. */
export function testEventRecord(destinationId: string, accountId: string): EventRecord {
  const eventId = newId('ev');
  const envelope = {
    event_id: eventId,
    event_type: DESTINATION_TEST_EVENT_TYPE,
    event_timestamp: new Date().toISOString(),
    account_id: accountId,
    principal: null,
    object: {
      destination_id: destinationId,
      message: 'test event sent by POST /event_destinations/{id}/test',
    },
  };
  return {
    eventId,
    eventType: DESTINATION_TEST_EVENT_TYPE,
    accountId,
    partitionKey: destinationId,
    json: JSON.stringify(envelope),
  };
}

/**
 * Sends one synthetic event to one destination through its normal path (batcher, sink, spool on
 * failure), so the test checks what real events go through. `reload` (the pipeline's) is awaited
 * first so a destination created or changed a moment ago is tested as it is now stored. The
 * caller checks that `accountId` owns the destination; it only stamps the envelope here.
 */
export async function deliverTestEvent(
  destinations: Destinations,
  id: string,
  accountId: string,
  options: { reload?: () => Promise<void> } = {},
): Promise<TestDelivery> {
  await options.reload?.();
  const record = testEventRecord(id, accountId);
  const destination = destinations.get(id);
  if (destination === undefined) {
    return {
      eventId: record.eventId,
      durable: false,
      delivered: false,
      error: `event destination "${id}" is not open in the pipeline (see the service log)`,
    };
  }
  try {
    const receipt = await destination.deliver(RecordBlock.of([record]));
    return {
      eventId: record.eventId,
      durable: true,
      delivered: receipt.written,
      error: receipt.reason,
    };
  } catch (error) {
    return {
      eventId: record.eventId,
      durable: false,
      delivered: false,
      error: (error as Error).message,
    };
  }
}
