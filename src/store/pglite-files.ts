import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { restrictTree } from '../shared/files/data-dir.ts';
import { seedFromTemplate, templateArchive } from './pglite-template.ts';

// PGlite's PostgreSQL runs with PostgreSQL's default shared_buffers (128 MB), which live in its
// WebAssembly memory: 188 MiB of it instead of the 128 MiB the module starts with, filled as
// pages are read and never given back. The store holds configuration, not events (a few MiB;
// the OS page cache keeps its files too), so 16 MB of buffers keep the memory at its initial
// 128 MiB (wal_buffers follows at 1/32). The defaults besides are PGlite's own.
const PGLITE_SETTINGS = ['shared_buffers=16MB'];

/** An open PGlite and what to do after closing it. */
export interface OpenPglite {
  db: PGlite;
  /** Closes PGlite and restricts the files written meanwhile. */
  close(): Promise<void>;
}

/**
 * Opens PGlite on the directory `dir` (in memory when undefined); the caller holds the store's
 * lock. A new store is unpacked from the PGlite version's template (pglite-template.ts).
 */
export async function openPgliteFiles(dir: string | undefined): Promise<OpenPglite> {
  // Each engine's library loads only when it is the one configured (a faster start).
  const { PGlite } = await import('@electric-sql/pglite');
  if (dir !== undefined) mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Store files are 0600 (PGlite ignores the umask for some): after opening, and after closing
  // for those written meanwhile (inside DATA_DIR and store/, both 0700, until then).
  const restrict = () => (dir === undefined ? Promise.resolve() : restrictTree(dir));
  const startParams = [
    ...PGlite.defaultStartParams,
    ...PGLITE_SETTINGS.flatMap((setting) => ['-c', setting]),
  ];
  // A new store starts from the version's pre-initialised cluster instead of initdb: unpacked
  // into an empty directory, or loaded by PGlite itself in memory.
  const memoryTemplate = dir === undefined ? templateArchive() : undefined;
  if (dir !== undefined) seedFromTemplate(dir);
  // Options in one object: `new PGlite(undefined, options)` ignores them.
  const db = new PGlite({
    dataDir: dir,
    startParams,
    loadDataDir: memoryTemplate && new Blob([memoryTemplate], { type: 'application/x-gzip' }),
  });
  await db.waitReady;
  await restrict();
  return {
    db,
    async close() {
      await db.close();
      await restrict();
    },
  };
}

/** The size of PGlite's WebAssembly memory (its Emscripten module's heap view; not typed). */
export function wasmMemoryBytes(db: PGlite): number {
  const mod = (db as unknown as { mod?: { HEAPU8?: Uint8Array } }).mod;
  return mod?.HEAPU8?.byteLength ?? 0;
}
