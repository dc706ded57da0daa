import { type Sink, SinkError } from '../sinks/types.ts';
import { type Destination, destinationClosed, notDurable } from './destination.ts';

// What stands where a destination (or its sink) cannot be open. A configured id must always
// find something: no destination at all means "deleted" to deliverAll, which would acknowledge
// the events undelivered.

/** A target that cannot be built parks its destination (error visible) instead of failing the pipeline. */
export function unbuiltSink(error: unknown): Sink {
  const message = `cannot build the destination's target: ${(error as Error).message}`;
  return {
    write: async () => {
      throw new SinkError(message, false);
    },
    close: async () => {},
  };
}

/**
 * Stands in for a destination whose target changed while it is closed and opened again: the
 * routing still names it, so a delivery in that window waits for the new one (`next()` once
 * `reopened` settles).
 */
export function reopening(
  id: string,
  old: Destination,
  reopened: Promise<void>,
  next: () => Destination | undefined,
): Destination {
  return {
    async deliver(records) {
      await reopened;
      const destination = next();
      if (destination === undefined) throw destinationClosed(id);
      return destination.deliver(records);
    },
    health: () => old.health(),
    close: async () => {},
  };
}

/**
 * Stands in for a destination whose spool could not be opened (disk full, permissions): its
 * events cannot be made durable, so deliveries fail (retryable) and health shows why.
 */
export function unopened(id: string, error: unknown): Destination {
  const message = `cannot open the destination: ${error instanceof Error ? error.message : String(error)}`;
  const at = new Date().toISOString();
  return {
    deliver: () => Promise.reject(notDurable(`destination ${id}: ${message}`)),
    health: () => ({
      status: 'parked',
      last_error: message,
      last_error_at: at,
      last_success_at: null,
      backlog: { events: 0, bytes: 0 },
    }),
    close: async () => {},
  };
}
