import { createRequire } from 'node:module';

// kafkajs 2.2.4 (its last release) schedules the pending-request check of every broker
// connection with setTimeout(throttledUntil - Date.now()) even when nothing is pending and no
// throttle is set. throttledUntil is then -1, so the delay is about -Date.now(): Node warns
// (TimeoutNegativeWarning), runs the check after 1 ms, and the check schedules itself again —
// a 1 ms timer loop per connection for the producer's whole life (tulios/kafkajs#1751, #1704;
// the fix, PR #1768, is unreleased). patchRequestQueue() replaces that one method with the
// fixed one, which schedules nothing when there is nothing to check.

interface RequestQueue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** kafkajs's CHECK_PENDING_REQUESTS_INTERVAL: how soon to look again at requests held back. */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;

function scheduleCheckPendingRequests(this: RequestQueue): void {
  if (this.throttleCheckTimeoutId) return;
  const throttledFor = this.throttledUntil - Date.now();
  // Nothing held back and no throttle: nothing to check until the next request arrives.
  if (this.pending.length === 0 && throttledFor <= 0) return;
  const delay = throttledFor > 0 ? throttledFor : CHECK_PENDING_REQUESTS_INTERVAL_MS;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
}

/**
 * Fixes kafkajs's RequestQueue (see above) once per process. Only the known faulty version of
 * the method is replaced: a kafkajs release that changed it is left as it is.
 */
export function patchRequestQueue(): void {
  const { prototype } = createRequire(import.meta.url)(
    'kafkajs/src/network/requestQueue/index.js',
  ) as { prototype: RequestQueue };
  const original = prototype.scheduleCheckPendingRequests;
  if (original === scheduleCheckPendingRequests) return;
  if (!/let scheduleAt = this\.throttledUntil - Date\.now\(\)/.test(String(original))) return;
  prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
}
