import type { Logger } from '../../shared/logger.ts';
import { CLICKHOUSE_SINK } from './clickhouse/index.ts';
import { FILE_SINK } from './file/index.ts';
import { accountEventsDir } from './file/layout.ts';
import { KAFKA_SINK } from './kafka/index.ts';
import type { Settings } from './settings.ts';
import type { Sink, SinkKind } from './types.ts';

/**
 * The kinds of sink this deployment delivers to. The API's target shapes, the OpenAPI document,
 * the store's secret sealing and the pipeline's sink factory all loop over this list: a new
 * kind is one descriptor here. A descriptor loads its client library only when a sink is made.
 */
// biome-ignore lint/suspicious/noExplicitAny: each descriptor has its own config type.
export const SINKS: readonly SinkKind<any>[] = [FILE_SINK, KAFKA_SINK, CLICKHOUSE_SINK];

/** A destination's target as stored: one key, a kind of SINKS, holding its settings. */
export type TargetSettings = Record<string, Settings>;

/** The descriptor of a kind, or undefined. */
export function sinkKind(kind: string): SinkKind | undefined {
  return SINKS.find((sink) => sink.kind === kind);
}

/** A target's kind and settings; a target naming no known kind is a bug upstream of here. */
export function targetKind(target: TargetSettings): { sink: SinkKind; settings: Settings } {
  for (const [kind, settings] of Object.entries(target)) {
    const sink = sinkKind(kind);
    if (sink !== undefined) return { sink, settings };
  }
  throw new TypeError(`destination target has no supported kind: ${Object.keys(target)}`);
}

/** Builds the sink of a stored target; a file target's path is inside its account's directory. */
export async function createSink(
  target: TargetSettings,
  deps: { dataDir: string; accountId: string; logger: Logger },
): Promise<Sink> {
  const { sink, settings } = targetKind(target);
  const config = sink.parse(settings, {
    accountDir: accountEventsDir(deps.dataDir, deps.accountId),
  });
  return sink.create(config, { logger: deps.logger });
}
