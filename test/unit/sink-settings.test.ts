import { describe, expect, it } from 'vitest';
import {
  completeTarget,
  readTarget,
} from '../../src/control-plane/api/event-destinations/target.ts';
import { SINKS } from '../../src/data-plane/sinks/index.ts';
import { KAFKA_SETTINGS } from '../../src/data-plane/sinks/kafka/config.ts';
import { keepSecrets, mapSecrets, present } from '../../src/data-plane/sinks/settings.ts';
import type { SinkKind } from '../../src/data-plane/sinks/types.ts';
import { AppError } from '../../src/shared/errors.ts';
import { createMetrics } from '../../src/shared/metrics.ts';

const PEM = '-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n';
const kafka = {
  brokers: ['k:9092'],
  topic: 't',
  sasl: { mechanism: 'plain', username: 'u', password: 'sasl-secret' },
  tls: { cert: PEM, key: PEM },
};

describe('sink settings, declared once per kind', () => {
  it('finds every secret from the schema, at any depth', () => {
    const sealed = mapSecrets(KAFKA_SETTINGS, kafka, (secret) => `sealed(${secret.length})`);
    expect(sealed).toEqual({
      ...kafka,
      sasl: { ...kafka.sasl, password: 'sealed(11)' },
      tls: { cert: PEM, key: `sealed(${PEM.length})` },
    });
    expect(mapSecrets(KAFKA_SETTINGS, { ...kafka, tls: true }, () => 'x').tls).toBe(true);
  });

  it('shows settings in the schema order, each secret as its _set flag', () => {
    const shown = present(KAFKA_SETTINGS, { tls: kafka.tls, topic: 't', sasl: kafka.sasl });
    expect(JSON.stringify(shown)).toBe(
      JSON.stringify({
        topic: 't',
        sasl: { mechanism: 'plain', username: 'u', password_set: true },
        tls: { cert: PEM, key_set: true },
      }),
    );
  });

  it('keeps an omitted secret from the previous settings, only where its object is given', () => {
    const input = { ...kafka, sasl: { mechanism: 'plain', username: 'v' }, tls: true };
    expect(keepSecrets(KAFKA_SETTINGS, input, kafka)).toEqual({
      ...input,
      sasl: { mechanism: 'plain', username: 'v', password: 'sasl-secret' },
    });
    expect(keepSecrets(KAFKA_SETTINGS, { brokers: ['k:1'], topic: 't' }, kafka)).toEqual({
      brokers: ['k:1'],
      topic: 't',
    });
  });

  it('gives every kind a settings schema whose defaults its parser accepts', () => {
    const minimal: Record<string, Record<string, unknown>> = {
      file: { path: 'x' },
      kafka: { brokers: ['k:1'], topic: 't' },
      clickhouse: { url: 'http://ch:8123' },
    };
    expect(SINKS.map((sink) => sink.kind).sort()).toEqual(Object.keys(minimal).sort());
    for (const sink of SINKS) {
      expect(() => sink.parse(minimal[sink.kind], { accountDir: '/srv' })).not.toThrow();
    }
  });

  it('answers 400 for a bad setting, and lets a bug in a parser stay a bug', () => {
    const refused = () =>
      completeTarget(
        readTarget({ kafka: { ...kafka, max_in_flight_requests: 9 } }),
        undefined,
        '/',
      );
    expect(refused).toThrow(AppError);
    // The declared bound (the settings schema) refuses it before the sink's parser runs.
    expect(refused).toThrow('"target.kafka.max_in_flight_requests" must be at most 5');

    const file = SINKS.find((sink) => sink.kind === 'file') as SinkKind;
    const broken: SinkKind = {
      ...file,
      parse: () => {
        throw new TypeError('a bug');
      },
    };
    expect(() => completeTarget({ sink: broken, settings: { path: 'x' } }, undefined, '/')).toThrow(
      TypeError,
    );
  });

  it('shows every kind of sink in the metrics from the start, at zero', async () => {
    const text = await createMetrics({
      sinkKinds: SINKS.map((sink) => sink.kind),
    }).registry.metrics();
    for (const { kind } of SINKS) {
      expect(text).toContain(`agent_ingress_sink_records_delivered_total{sink="${kind}"} 0`);
      expect(text).toContain(
        `agent_ingress_sink_write_errors_total{sink="${kind}",retriable="false"} 0`,
      );
    }
  });
});
