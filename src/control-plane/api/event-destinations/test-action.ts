import type { FastifyInstance } from 'fastify';
import { getEventDestination } from '../../../data-plane/store/event-destinations.ts';
import { AppError } from '../../../shared/errors.ts';
import type { ApiDeps } from '../deps.ts';
import { notFound } from '../resources.ts';
import { acceptPathEchoes, objectWith } from '../validate.ts';
import { EVENT_DESTINATIONS } from './resource.ts';

/**
 * POST /event_destinations/{id}/test: sends one `event_destination_test.v0` event through the
 * pipeline and says honestly what happened: `delivered` (the target took it) or `spooled` (kept
 * on disk and retried like any event, with the target's error). Both are 200: the event is
 * durable either way. Ownership is checked in the store first, so another account's id is 404
 * before anything is sent. The answer waits on the account's own target (up to its request
 * timeout), so it is a long-lived answer (src/control-plane/api/long-lived.ts).
 */
/** Sends the destination `id` its test event, once it is known to be the account's. */
async function testOf(deps: ApiDeps, accountId: string, id: string) {
  const row = await getEventDestination(deps.db, accountId, id, deps.keyring);
  if (row === undefined) throw notFound(EVENT_DESTINATIONS, id);
  if (deps.testDestination === undefined) {
    throw new AppError('ERR_UNAVAILABLE', 'this instance cannot send test events (no pipeline)');
  }
  return deps.testDestination(accountId, id);
}

export function addDestinationTestAction(app: FastifyInstance, deps: ApiDeps): void {
  const echoId = { preValidation: acceptPathEchoes({ id: 'id' }) };
  app.post<{ Params: { id: string } }>('/event_destinations/:id/test', echoId, async (request) => {
    if (request.body !== undefined && request.body !== null) objectWith(request.body, []);
    const { accountId } = request.caller;
    const { id } = request.params;
    // The place is taken as the request arrives, before any store query: the account's limit
    // counts tests in the order they came, however long the store takes to answer.
    const release = deps.longLived.take(accountId);
    const result = await testOf(deps, accountId, id).finally(release);
    if (!result.durable) {
      throw new AppError(
        'ERR_UNAVAILABLE',
        `the test event could not be delivered or spooled: ${result.error}`,
        { id, event_id: result.eventId },
      );
    }
    return {
      event_id: result.eventId,
      delivered: result.delivered,
      status: result.delivered ? 'delivered' : 'spooled',
      error: result.error,
      health: deps.destinationHealth?.(id) ?? null,
    };
  });
}
