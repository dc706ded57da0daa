import type { Logger } from '../../shared/logger.ts';
import type { Batch } from './record-block.ts';
import type { JsonSchema, Settings } from './settings.ts';

export type { Batch, EventRecord } from './record-block.ts';

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

/** What building a sink may need beyond its settings. */
export interface SinkContext {
  /** The account's directory, `DATA_DIR/events/<account_id>`: file paths are inside it. */
  accountDir: string;
}

/**
 * One kind of sink, described by itself: its settings' JSON Schema (the only declaration of
 * them: types, secrets, defaults, bounds), the parser that checks values the schema cannot, and
 * the factory, which loads the kind's client library on first use.
 */
export interface SinkKind<Config = unknown> {
  /** The key naming it in a destination's `target`. */
  kind: string;
  /** One line for the OpenAPI document. */
  doc: string;
  settings: JsonSchema;
  /** Validated settings with defaults filled in; throws SinkConfigError naming the bad one. */
  parse(settings: Settings, context: SinkContext): Config;
  /** The settings to store: one spelling of each value (a file path normalised). */
  canonical?(settings: Settings): Settings;
  create(config: Config, deps: { logger: Logger }): Promise<Sink>;
}
