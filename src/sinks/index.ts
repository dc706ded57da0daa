import type { Logger } from '../logger.ts';
import { type ClickHouseSinkSettings, parseClickHouseSinkConfig } from './clickhouse/config.ts';
import { createClickHouseSink } from './clickhouse/sink.ts';
import { tableForEventType } from './clickhouse/tables.ts';
import { parseFileSinkConfig } from './file/config.ts';
import { accountEventsDir } from './file/layout.ts';
import { createFileSink } from './file/sink.ts';
import { type KafkaSinkSettings, parseKafkaSinkConfig } from './kafka/config.ts';
import { createKafkaSink } from './kafka/sink.ts';
import type { Sink } from './types.ts';

/** A destination's target as the API stores it: exactly one of the supported kinds. */
export interface TargetSettings {
  file?: { path: string; max_file_bytes?: number; max_file_age_ms?: number };
  kafka?: KafkaSinkSettings;
  clickhouse?: ClickHouseSinkSettings;
}

/** Builds the sink of a stored target; a file target's path is inside its account's directory. */
export function createSink(
  target: TargetSettings,
  deps: { dataDir: string; accountId: string; logger: Logger },
): Sink {
  const { logger } = deps;
  if (target.file !== undefined) {
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
    return createKafkaSink({ config: parseKafkaSinkConfig(target.kafka), logger });
  }
  if (target.clickhouse !== undefined) {
    return createClickHouseSink({
      config: parseClickHouseSinkConfig(target.clickhouse),
      tableFor: tableForEventType,
      logger,
    });
  }
  throw new Error(`destination target has no supported kind: ${Object.keys(target).join(', ')}`);
}
