/** One event ready for delivery: the envelope already serialized once, shared by every sink. */
export interface EventRecord {
  eventId: string;
  eventType: string;
  accountId: string;
  /** Keeps one host's events together (Kafka partition key). */
  partitionKey: string;
  /** The envelope as one JSON document, no trailing newline. */
  json: string;
}

/** What a sink receives: records for one destination, in arrival order. */
export interface Batch {
  records: EventRecord[];
  /** Sum of the records' JSON byte lengths. */
  bytes: number;
}

/** A delivery target. `write` resolves only when the batch is durable at the target. */
export interface Sink {
  write(batch: Batch): Promise<void>;
  close(): Promise<void>;
}

/** A failed write: retriable (network, server busy) or permanent (bad table, bad credentials). */
export class SinkError extends Error {
  readonly retriable: boolean;
  constructor(message: string, retriable: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SinkError';
    this.retriable = retriable;
  }
}
