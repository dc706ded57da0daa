import { registerHooks } from 'node:module';
import { isMainThread } from 'node:worker_threads';

// Preloaded into a service process with `--import` (see test/e2e/startup.test.ts): records every
// package the main thread resolves, by import or require, and prints them on stderr at exit as
// one line: `loaded packages: <name> <name> …`.

const loaded = new Set<string>();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(resolved.url)?.[1];
    if (name !== undefined) loaded.add(name);
    return resolved;
  },
});
if (isMainThread) {
  process.on('exit', () => {
    process.stderr.write(`loaded packages: ${[...loaded].sort().join(' ')}\n`);
  });
}

/** The packages a process preloaded with this module printed at exit. */
export function loadedPackages(stderr: string): string[] {
  const line = /^loaded packages: (.*)$/m.exec(stderr);
  if (line === null) throw new Error(`no "loaded packages" line on stderr:\n${stderr}`);
  return line[1].split(' ');
}

/** The path to pass to `node --import`. */
export const LOADED_PACKAGES_HOOK = import.meta.filename;
