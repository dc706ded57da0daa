import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packTree, unpackTree } from '../../src/shared/files/tar.ts';
import {
  pgliteVersion,
  seedFromTemplate,
  TEMPLATE_DIR,
  templateFile,
} from '../../src/store/pglite-template.ts';

// The embedded store's pre-initialised cluster: kept for the installed PGlite version, unpacked
// into an empty store directory only, and the archive format it is kept in.

describe('the PGlite template', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agin-template-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is kept for the installed PGlite version, and for no other', () => {
    expect(
      existsSync(templateFile()),
      `no template for PGlite ${pgliteVersion()}: run npm run store:template`,
    ).toBe(true);
    expect(readdirSync(TEMPLATE_DIR)).toEqual([`pglite-${pgliteVersion()}.tar.gz`]);
  });

  it('fills an empty store directory with a cluster, files 0600 and directories 0700', () => {
    const store = join(dir, 'store');
    mkdirSync(store);
    expect(seedFromTemplate(store)).toBe(true);
    expect(readFileSync(join(store, 'PG_VERSION'), 'utf8')).toMatch(/^\d+\n$/);
    expect(statSync(join(store, 'global', 'pg_control')).mode & 0o777).toBe(0o600);
    expect(statSync(join(store, 'base')).mode & 0o777).toBe(0o700);
    expect(existsSync(`${store}.seeding`)).toBe(false);
  });

  it('leaves a store directory that holds anything alone', () => {
    const store = join(dir, 'store');
    mkdirSync(store);
    writeFileSync(join(store, 'partial'), '');
    expect(seedFromTemplate(store)).toBe(false);
    expect(readdirSync(store)).toEqual(['partial']);
  });
});

describe('the template archive (tar.ts)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agin-tar-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gives back the tree it packed: nested and empty directories, empty and large files', () => {
    const from = join(dir, 'from');
    mkdirSync(join(from, 'a', 'b'), { recursive: true });
    mkdirSync(join(from, 'empty'));
    writeFileSync(join(from, 'a', 'b', 'data'), Buffer.alloc(70_000, 7));
    writeFileSync(join(from, 'a', 'zero'), '');
    writeFileSync(join(from, 'PG_VERSION'), '17\n');
    const to = join(dir, 'to');
    unpackTree(packTree(from), to);
    expect(readFileSync(join(to, 'a', 'b', 'data'))).toEqual(Buffer.alloc(70_000, 7));
    expect(readFileSync(join(to, 'a', 'zero'), 'utf8')).toBe('');
    expect(readFileSync(join(to, 'PG_VERSION'), 'utf8')).toBe('17\n');
    expect(readdirSync(join(to, 'empty'))).toEqual([]);
    expect(statSync(join(to, 'a', 'zero')).mode & 0o777).toBe(0o600);
  });

  it('refuses names it cannot keep, and entries that would land outside the target', () => {
    const long = join(dir, 'long');
    mkdirSync(long);
    writeFileSync(join(long, 'x'.repeat(101)), '');
    expect(() => packTree(long)).toThrow('name over 100 bytes');
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'xx'), 'escape');
    // The same archive with its one name rewritten to "../": tar headers are plain text.
    const archive = packTree(outside);
    const tar = gunzipSync(archive);
    tar.write('..', 0, 'ascii');
    expect(() => unpackTree(gzipSync(tar), join(dir, 'to'))).toThrow('outside the target');
  });
});
