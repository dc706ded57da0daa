import { existsSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { unpackTree } from '../shared/files/tar.ts';

// A first start of the embedded store used to run PGlite's initdb (PostgreSQL's bootstrap in
// WebAssembly: 4–30 s, most of a first start). The cluster initdb makes is the same for every
// new store of one PGlite version, so it is made once (`npm run store:template`) and kept here
// as a gzipped tar; a new store is unpacked from it. Without a template for the installed
// version, PGlite's initdb runs as before. See docs/decisions.md#pglite-template.

/** Where the templates are kept, one per PGlite version. */
export const TEMPLATE_DIR = join(import.meta.dirname, 'pglite-template');

/** The installed PGlite's version (its package.json, beside the module Node resolves). */
export function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const manifest = join(entry, '..', '..', 'package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** The template of PGlite `version`. */
export function templateFile(version: string = pgliteVersion()): string {
  return join(TEMPLATE_DIR, `pglite-${version}.tar.gz`);
}

/** The installed version's template, gzipped; undefined when there is none. */
export function templateArchive(): Buffer | undefined {
  const template = templateFile();
  return existsSync(template) ? readFileSync(template) : undefined;
}

/**
 * Fills the empty store directory `dir` from the installed version's template; false when there
 * is none or `dir` holds anything already (PGlite then opens or initialises it). The caller holds
 * the store's lock. Unpacked beside `dir` and renamed into place: a start killed meanwhile leaves
 * `dir` empty, and the next one unpacks again.
 */
export function seedFromTemplate(dir: string): boolean {
  if (readdirSync(dir).length > 0) return false;
  const archive = templateArchive();
  if (archive === undefined) return false;
  const staging = `${dir}.seeding`;
  rmSync(staging, { recursive: true, force: true });
  unpackTree(archive, staging);
  rmdirSync(dir);
  renameSync(staging, dir);
  return true;
}
