import type { EventDestinationRow } from '../../../data-plane/store/event-destinations.ts';
import { presentTarget } from './target.ts';

/**
 * The event destination resource without secrets: what GET shows (before `health`) and what its
 * audit events carry.
 */
export function presentEventDestination(row: EventDestinationRow, publicUrl: string) {
  return {
    id: row.id,
    uri: `${publicUrl}/event_destinations/${row.id}`,
    created_at: row.created_at.toISOString(),
    description: row.description,
    metadata: row.metadata,
    format: row.format,
    target: presentTarget(row.target),
  };
}

/** The event destination resource as the API shows it. */
export type EventDestination = ReturnType<typeof presentEventDestination>;

/** The resource with the pipeline's delivery health, when the pipeline reports one. */
export function withHealth(resource: EventDestination, health: unknown) {
  return health === undefined ? resource : { ...resource, health };
}
