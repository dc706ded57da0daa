import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/**
 * Makes the calling worker thread yield the CPU to the ingest thread (nice +10 for this thread;
 * Linux names it in /proc/thread-self): when workers are saturated, the event loop that reads
 * requests, answers them and serves /healthz and the REST API still gets the CPU it needs.
 * Elsewhere, or on the main thread: nothing.
 */
export function lowerThreadPriority(): void {
  try {
    if (!isMainThread) setPriority(Number(readlinkSync('/proc/thread-self').split('/').at(-1)), 10);
  } catch {}
}
