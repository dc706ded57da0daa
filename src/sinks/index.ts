import { join } from 'node:path';
import type { Logger } from '../logger.ts';
import { type ClickHouseSinkSettings, parseClickHouseSinkConfig } from './clickhouse/config.ts';
import { createClickHouseSink } from './clickhouse/sink.ts';
import { tableForEventType } from './clickhouse/tables.ts';
import { parseFileSinkConfig } from './file/config.ts';
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

/** Where file destinations' relative paths are anchored: `DATA_DIR/events`. */
export function fileBaseDir(dataDir: string): string {
  return join(dataDir, 'events');
}

/** Builds the sink of a stored target. */
export function createSink(
  target: TargetSettings,
  deps: { dataDir: string; logger: Logger },
): Sink {
  const { logger } = deps;
  if (target.file !== undefined) {
    const config = parseFileSinkConfig(
      {
        path: target.file.path,
        maxFileBytes: target.file.max_file_bytes,
        maxFileAgeMs: target.file.max_file_age_ms,
      },
      { baseDir: fileBaseDir(deps.dataDir), allowAbsolute: true },
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
