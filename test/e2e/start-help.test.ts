import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config/settings.ts';
import { runProcess } from '../helpers/run-process.ts';

// `npm start -- --help` lists every setting with its default and meaning, and exits 0 without
// starting anything: whatever the environment holds, even a setting that would refuse a start.

describe('npm start -- --help', () => {
  const parent = mkdtempSync(join(tmpdir(), 'agin-e2e-help-'));
  const dataDir = join(parent, 'data');
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it('prints every setting with its default and meaning, and exits 0', async () => {
    const { code, stdout, stderr } = await runProcess(
      'npm',
      ['start', '--silent', '--', '--help'],
      {
        PORT: 'eighty',
        DATA_DIR: dataDir,
      },
    );
    expect(code, stderr).toBe(0);
    expect(stderr).toBe('');
    expect(stdout).toMatch(/^Usage: npm start/);
    const text = stdout.replace(/\n {6}/g, ' '); // a meaning's wrapped lines, joined
    for (const { env, kind, meaning } of Object.values(SETTINGS)) {
      const shown = kind.default ?? 'unset';
      expect(text, env).toContain(`  ${env}  default ${shown}`);
      expect(text, env).toContain(meaning.replaceAll('`', ''));
    }
    expect(existsSync(dataDir), 'DATA_DIR created').toBe(false);
  });
});
