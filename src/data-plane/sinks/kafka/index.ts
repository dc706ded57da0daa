import type { SinkKind } from '../types.ts';
import { KAFKA_SETTINGS, type KafkaSinkConfig, parseKafkaSinkConfig } from './config.ts';

/** The Kafka sink: one producer per destination, records keyed by host, in order. */
export const KAFKA_SINK: SinkKind<KafkaSinkConfig> = {
  kind: 'kafka',
  doc: 'a Kafka topic, one record per event keyed by host',
  settings: KAFKA_SETTINGS,
  parse: parseKafkaSinkConfig,
  async create(config, { logger }) {
    const { createKafkaSink } = await import('./sink.ts');
    return createKafkaSink({ config, logger });
  },
};
