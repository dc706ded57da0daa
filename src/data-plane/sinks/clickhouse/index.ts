import type { SinkKind } from '../types.ts';
import {
  CLICKHOUSE_SETTINGS,
  type ClickHouseSinkConfig,
  parseClickHouseSinkConfig,
} from './config.ts';

/** The ClickHouse sink: one table per event type, created and grown with the catalogue. */
export const CLICKHOUSE_SINK: SinkKind<ClickHouseSinkConfig> = {
  kind: 'clickhouse',
  doc: 'ClickHouse tables, one per event type, created and grown as the catalogue does',
  settings: CLICKHOUSE_SETTINGS,
  parse: parseClickHouseSinkConfig,
  async create(config, { logger }) {
    const [{ createClickHouseSink }, { tableForEventType }] = await Promise.all([
      import('./sink.ts'),
      import('./tables.ts'),
    ]);
    return createClickHouseSink({ config, tableFor: tableForEventType, logger });
  },
};
