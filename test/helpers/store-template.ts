import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { openStore } from '../../src/store/index.ts';
import { pgliteVersion, templateFile } from '../../src/store/pglite-template.ts';

// Every test store on PGlite starts from one migrated store, made once per run by vitest's
// globalSetup (test/global-setup.ts) and kept while PGlite, its template and the migrations stay
// the same: opening a new store and migrating it costs seconds of CPU, copying one milliseconds.
// A test that needs the service's own first start (template unpacking, migrations) opts out.

const ROOT = join(import.meta.dirname, '..', '..');
const MIGRATIONS = join(ROOT, 'src', 'store', 'migrations');
const CACHE = join(ROOT, 'node_modules', '.cache', 'agent-ingress');

let memo: string | undefined;

/** Where the migrated store for the current PGlite version, template and migrations is kept. */
export function migratedStoreDir(): string {
  memo ??= storeDirName();
  return memo;
}

function storeDirName(): string {
  const hash = createHash('sha256').update(pgliteVersion());
  const template = templateFile();
  if (existsSync(template)) hash.update(readFileSync(template));
  for (const name of readdirSync(MIGRATIONS).sort()) {
    hash.update(name).update(readFileSync(join(MIGRATIONS, name)));
  }
  return join(CACHE, `migrated-store-${hash.digest('hex').slice(0, 16)}`);
}

/** Makes the migrated store unless it is there (made beside it, then renamed into place). */
export async function ensureMigratedStore(): Promise<string> {
  const dir = migratedStoreDir();
  if (existsSync(dir)) return dir;
  mkdirSync(CACHE, { recursive: true });
  const staging = mkdtempSync(`${dir}.staging-`);
  try {
    const db = await openStore({ databaseUrl: undefined, dataDir: staging });
    await db.close();
    // Those of earlier migrations or PGlite versions go.
    for (const old of readdirSync(CACHE).filter((name) => name.startsWith('migrated-store-'))) {
      if (!old.startsWith(basename(dir)))
        rmSync(join(CACHE, old), { recursive: true, force: true });
    }
    try {
      renameSync(join(staging, 'store'), dir);
    } catch (error) {
      // Another run (another vitest in this checkout) made it meanwhile: the same store.
      if (!existsSync(dir)) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return dir;
}

/**
 * Copies the migrated store to `dataDir/store`; false (nothing copied) when globalSetup has not
 * made it, or `dataDir` does not exist yet.
 */
export function seedTestStore(dataDir: string): boolean {
  const dir = migratedStoreDir();
  // A DATA_DIR the service is to create (and make 0700) is left to it.
  if (!existsSync(dir) || !existsSync(dataDir)) return false;
  cpSync(dir, join(dataDir, 'store'), { recursive: true });
  // As the service keeps its store: for its own user only.
  chmodSync(join(dataDir, 'store'), 0o700);
  return true;
}
