import { setFlagsFromString } from 'node:v8';

// Under load the ingest thread's JS heap is small (~35 MB) while ArrayBuffers pass through it at
// hundreds of MB/s (request bodies, the workers' record blocks, batches). V8's dynamic heap
// growing then sets each next old-generation limit barely above the live size, and the thread
// marks and compacts almost without pause: ~6 full GCs a second, their concurrent marking a
// third of the service's CPU (bench:pipeline, --trace-gc). A fixed factor of 3 (the next limit
// at three times the live heap: ~100 MB here) leaves room between collections and costs nothing
// on an idle service. Set at start, before the workers exist, which inherit it.

/** The heap growing factor in percent above 1 (V8's --heap-growing-percent): 200 = ×3. */
export const HEAP_GROWING_PERCENT = 200;

/** Sets V8's heap growing factor, unless the command line set one (NODE_OPTIONS cannot). */
export function setHeapGrowth(): void {
  const given = process.execArgv.some((arg) => /^--heap[-_]growing[-_]percent/.test(arg));
  if (!given) setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
