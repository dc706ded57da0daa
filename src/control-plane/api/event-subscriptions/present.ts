import type { EventSourceRow, EventSubscriptionRow } from '../../../store/event-subscriptions.ts';

/** The URI of a subscription's source of one event type. */
export function sourceUri(publicUrl: string, subscriptionId: string, type: string): string {
  return `${publicUrl}/event_subscriptions/${subscriptionId}/sources/${type}`;
}

/** An event source resource: its type, filter, field selection, sample rate, redaction, URI. */
export function presentEventSource(
  source: Pick<
    EventSourceRow,
    | 'subscription_id'
    | 'type'
    | 'filter'
    | 'fields'
    | 'sample_rate'
    | 'redact_headers'
    | 'keep_credentials'
  >,
  publicUrl: string,
) {
  return {
    type: source.type,
    filter: source.filter,
    fields: source.fields,
    sample_rate: source.sample_rate,
    redact_headers: source.redact_headers,
    keep_credentials: source.keep_credentials,
    uri: sourceUri(publicUrl, source.subscription_id, source.type),
  };
}

/** An event source as the API shows it. */
export type EventSource = ReturnType<typeof presentEventSource>;

/** The event subscription resource, also the object of its audit events. */
export function presentEventSubscription(
  row: EventSubscriptionRow,
  sources: EventSourceRow[],
  destinationIds: string[],
  publicUrl: string,
) {
  return {
    id: row.id,
    uri: `${publicUrl}/event_subscriptions/${row.id}`,
    created_at: row.created_at.toISOString(),
    description: row.description,
    metadata: row.metadata,
    sources: sources.map((source) => presentEventSource(source, publicUrl)),
    destinations: destinationIds.map((id) => ({
      id,
      uri: `${publicUrl}/event_destinations/${id}`,
    })),
  };
}

/** The event subscription resource as the API shows it. */
export type EventSubscription = ReturnType<typeof presentEventSubscription>;
