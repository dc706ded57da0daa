import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configurationPage } from '../../src/config/describe.ts';
import { loadConfig } from '../../src/config/load.ts';
import { SETTINGS } from '../../src/config/settings.ts';

// docs/configuration.md is the user's contract, generated from the table in
// src/config/settings.ts that the parser reads too. The page must be what the table generates,
// and the table must say what the parser does: every variable it reads is declared, and each
// declared default, set explicitly, changes nothing.

const PAGE = join(import.meta.dirname, '..', '..', 'docs', 'configuration.md');
const settings = Object.entries(SETTINGS).map(([field, setting]) => ({ field, ...setting }));

/** The variables loadConfig reads: every name it looks up in the environment it is given. */
function variablesRead(): Set<string> {
  const read = new Set<string>();
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
  });
  loadConfig(env);
  return read;
}

/** Normalised for comparing field names with variable names: AGENT_KEEPALIVE_MS, agentKeepAliveMs. */
const folded = (name: string) => name.replace(/_/g, '').toLowerCase();

describe('docs/configuration.md', () => {
  it('is what the settings table generates (npm run docs:config writes it)', () => {
    expect(readFileSync(PAGE, 'utf8'), 'run npm run docs:config').toBe(configurationPage());
  });

  it('has one row per setting', () => {
    const rows = readFileSync(PAGE, 'utf8').match(/^\| `[A-Z0-9_]+` \|/gm) ?? [];
    expect(rows.map((row) => row.slice(3, -3))).toEqual(
      expect.arrayContaining(settings.map(({ env }) => env)),
    );
    expect(rows).toHaveLength(settings.length);
  });
});

describe('the settings table', () => {
  const defaults = loadConfig({});
  const defaultOf = new Map(settings.map(({ env, kind }) => [env, kind.default]));

  it('declares every variable the service reads, and only those, once each', () => {
    const names = settings.map(({ env }) => env);
    expect(names.length).toBeGreaterThan(40);
    expect(new Set(names).size, 'a variable declared twice').toBe(names.length);
    expect(new Set(names)).toEqual(variablesRead());
  });

  it('names each Config field after its variable', () => {
    const misnamed = settings.filter(({ field, env }) => folded(field) !== folded(env));
    expect(misnamed.map(({ field, env }) => `${field}: ${env}`)).toEqual([]);
  });

  it('reads milliseconds from the _MS variables and bytes from the _BYTES ones, only', () => {
    for (const { env, kind } of settings) {
      expect(kind.unit === 'ms', env).toBe(env.endsWith('_MS'));
      expect(kind.unit === 'bytes', env).toBe(env.endsWith('_BYTES'));
    }
  });

  it('has a meaning of one sentence for every setting', () => {
    for (const { env, meaning } of settings) {
      expect(meaning, env).toMatch(/^[A-Z`].*\.$/);
      expect(meaning.split(/\.\s+[A-Z]/), env).toHaveLength(1);
    }
  });

  it.each(settings.filter(({ kind }) => kind.default !== undefined))(
    'states the default of $env: set to it, nothing changes',
    ({ env, kind }) => {
      // Other variables named in the default (PUBLIC_URL's HOST and PORT) take their defaults.
      const value = kind.default!.replace(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b/g, (name) =>
        defaultOf.has(name) && name !== env ? defaultOf.get(name)! : name,
      );
      expect(loadConfig({ [env]: value })).toEqual(defaults);
    },
  );

  it.each(settings.filter(({ kind }) => kind.default === undefined))(
    'leaves $env off or empty when unset',
    ({ field }) => {
      const value = defaults[field as keyof typeof defaults];
      expect([undefined, '', '[]']).toContain(Array.isArray(value) ? '[]' : value);
    },
  );
});
