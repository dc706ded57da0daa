import type { Logger } from '../logger.ts';
import type { ClickHouseSinkSettings } from './clickhouse/config.ts';
import { accountEventsDir } from './file/layout.ts';
import type { KafkaSinkSettings } from './kafka/config.ts';
import type { Sink } from './types.ts';

/** A destination's target as the API stores it: exactly one of the supported kinds. */
export interface TargetSettings {
  file?: { path: string; max_file_bytes?: number; max_file_age_ms?: number };
  kafka?: KafkaSinkSettings;
  clickhouse?: ClickHouseSinkSettings;
}

/**
 * Builds the sink of a stored target; a file target's path is inside its account's directory.
 * Each kind's module (and its client library: kafkajs, @clickhouse/client) loads on first use,
 * so a start loads only the kinds configured.
 */
export async function createSink(
  target: TargetSettings,
  deps: { dataDir: string; accountId: string; logger: Logger },
): Promise<Sink> {
  const { logger } = deps;
  if (target.file !== undefined) {
    const [{ parseFileSinkConfig }, { createFileSink }] = await Promise.all([
      import('./file/config.ts'),
      import('./file/sink.ts'),
    ]);
    const config = parseFileSinkConfig(
      {
        path: target.file.path,
        maxFileBytes: target.file.max_file_bytes,
        maxFileAgeMs: target.file.max_file_age_ms,
      },
      { baseDir: accountEventsDir(deps.dataDir, deps.accountId) },
    );
    return createFileSink({ config, logger });
  }
  if (target.kafka !== undefined) {
    const [{ parseKafkaSinkConfig }, { createKafkaSink }] = await Promise.all([
      import('./kafka/config.ts'),
      import('./kafka/sink.ts'),
    ]);
    return createKafkaSink({ config: parseKafkaSinkConfig(target.kafka), logger });
  }
  if (target.clickhouse !== undefined) {
    const [{ parseClickHouseSinkConfig }, { createClickHouseSink }, { tableForEventType }] =
      await Promise.all([
        import('./clickhouse/config.ts'),
        import('./clickhouse/sink.ts'),
        import('./clickhouse/tables.ts'),
      ]);
    return createClickHouseSink({
      config: parseClickHouseSinkConfig(target.clickhouse),
      tableFor: tableForEventType,
      logger,
    });
  }
  throw new Error(`destination target has no supported kind: ${Object.keys(target).join(', ')}`);
}
