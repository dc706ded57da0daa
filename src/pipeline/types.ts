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
