import { describe, expect, it } from 'vitest';
import { RoutePlan } from '../../src/data-plane/pipeline/route-plan.ts';

describe('RoutePlan', () => {
  const plan = new RoutePlan([
    { projectionKey: '*|d', destinationIds: ['d1', 'd2'] },
    { projectionKey: 'conn|d', destinationIds: ['d2'] },
    { projectionKey: '*|d', destinationIds: ['d3', 'd1'] },
  ]);

  it('indexes field selections and destinations once', () => {
    expect([...plan.group]).toEqual([0, 1, 0]);
    expect(plan.destinationIds).toEqual(['d1', 'd2', 'd3']);
    expect(plan.destinations.map((d) => [...d])).toEqual([[0, 1], [1], [2, 0]]);
  });

  it('tells per event which record is written and who has it', () => {
    plan.nextEvent();
    expect(plan.written(0)).toBe(false);
    expect(plan.written(0)).toBe(true);
    expect(plan.written(1)).toBe(false);
    expect(plan.sent(0, 0)).toBe(false);
    expect(plan.sent(0, 0)).toBe(true);
    expect(plan.sent(1, 0)).toBe(false);
    plan.nextEvent();
    expect(plan.written(0)).toBe(false);
    expect(plan.sent(0, 0)).toBe(false);
  });

  it("forgets the outputs of another request, keeps the current request's", () => {
    plan.forRequest(1);
    plan.outputs[1] = 'out';
    plan.forRequest(1);
    expect(plan.outputs[1]).toBe('out');
    plan.forRequest(2);
    expect(plan.outputs).toEqual([undefined, undefined, undefined]);
  });
});
