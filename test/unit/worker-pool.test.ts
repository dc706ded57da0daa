import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, describe, expect, it } from 'vitest';
import {
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { createRoutePool, routeFailureKind } from '../../src/pipeline/worker-pool.ts';
import { generateEvents } from '../helpers/events.ts';

describe('route-events worker pool', () => {
  const pool = createRoutePool({
    threads: 1,
    maxQueue: 8,
    maxEvents: 10_000,
    maxBytes: 4 * 1024 * 1024,
  });
  afterAll(() => pool.close());

  it('routes in a real worker and picks up each new configuration version', async () => {
    const events = generateEvents(4, { accounts: ['ac_pool'], tcpShare: 1, seed: 2 });
    const bytes = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
    const before = await pool.route(bytes, Date.now());
    expect(before.kind === 'routed' && before.deliveries).toEqual([]);
    pool.setConfig({
      version: 2,
      subscriptions: [
        {
          id: 'esb_1',
          accountId: 'ac_pool',
          sources: [{ type: 'tcp_connection_closed.v0', filter: '', fields: [] }],
          destinationIds: ['ed_1'],
        },
      ],
    });
    const after = await pool.route(bytes, Date.now());
    if (after.kind !== 'routed') throw new Error(after.kind);
    expect(after.deliveries.map((d) => [d.destinationId, d.records.length])).toEqual([['ed_1', 4]]);
    expect(fromBinary(PublishResponseSchema, after.response).accepted).toBe(4);
  });

  it('tells passing trouble from bugs', () => {
    expect(routeFailureKind(new Error('worker exited with code: 70'))).toBe('unavailable');
    expect(
      routeFailureKind(Object.assign(new Error('oom'), { code: 'ERR_WORKER_OUT_OF_MEMORY' })),
    ).toBe('unavailable');
    expect(routeFailureKind(new Error('Task queue is at limit'))).toBe('backpressure');
    expect(
      routeFailureKind(new TypeError("Cannot read properties of undefined (reading 'conn')")),
    ).toBe('internal');
  });
});
