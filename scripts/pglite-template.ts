import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { packTree } from '../src/shared/files/tar.ts';
import { pgliteVersion, TEMPLATE_DIR, templateFile } from '../src/store/pglite-template.ts';

// `npm run store:template`: makes the embedded store's template for the installed PGlite version
// (src/store/pglite-template.ts): a cluster PGlite's initdb made and closed cleanly, gzipped. Run
// it after upgrading PGlite (test/unit/pglite-template.test.ts fails until then); the templates
// of other versions are removed.

const version = pgliteVersion();
const dir = mkdtempSync(join(tmpdir(), 'agin-pglite-template-'));
try {
  const db = new PGlite(join(dir, 'store'));
  await db.waitReady;
  await db.close();
  mkdirSync(TEMPLATE_DIR, { recursive: true });
  for (const old of readdirSync(TEMPLATE_DIR)) rmSync(join(TEMPLATE_DIR, old));
  const archive = packTree(join(dir, 'store'));
  writeFileSync(templateFile(version), archive);
  process.stdout.write(`${templateFile(version)}: ${archive.length} bytes\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
