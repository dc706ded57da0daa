import { describe, expect, it } from 'vitest';
import { createAdmission } from '../../src/data-plane/pipeline/admission.ts';
import type { AppError } from '../../src/shared/errors.ts';

function codeOf(work: () => unknown): string | undefined {
  try {
    work();
    return undefined;
  } catch (error) {
    return (error as AppError).code;
  }
}

describe('admission', () => {
  it('counts claims against the slots and their bytes against the shared budget', () => {
    const admission = createAdmission({ maxRequests: 2, maxBytes: 100 });
    const first = admission.enter();
    const second = admission.enter();
    expect(codeOf(() => admission.enter())).toBe('ERR_BACKPRESSURE');
    first.take(60);
    expect(codeOf(() => second.take(50))).toBe('ERR_BACKPRESSURE');
    expect(admission.bytes).toBe(60);
    second.take(40);
    first.give(30);
    expect(admission.bytes).toBe(70);
    first.end();
    first.end();
    expect({ requests: admission.requests, bytes: admission.bytes }).toEqual({
      requests: 1,
      bytes: 40,
    });
    expect(admission.enter()).toBeDefined();
  });

  it('refuses, as too large rather than busy, what one claim could never hold', () => {
    const admission = createAdmission({ maxRequests: 4, maxBytes: 100 });
    const claim = admission.enter();
    claim.take(90);
    expect(codeOf(() => claim.take(20))).toBe('ERR_BODY_TOO_LARGE');
    claim.end();
    expect(codeOf(() => claim.take(1))).toBe('ERR_UNAVAILABLE');
  });

  it('closes: refuses new claims and waits for the open ones to end', async () => {
    const admission = createAdmission({ maxRequests: 4, maxBytes: 100 });
    const open = admission.enter();
    let closed = false;
    const closing = admission.close().then(() => {
      closed = true;
    });
    expect(codeOf(() => admission.enter())).toBe('ERR_UNAVAILABLE');
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(closed).toBe(false);
    open.end();
    await closing;
    expect(closed).toBe(true);
  });
});
