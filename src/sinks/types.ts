import type { Batch } from '../pipeline/types.ts';

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
