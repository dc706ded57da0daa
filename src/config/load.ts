import { SETTINGS, type Setting } from './settings.ts';

// The parser and the Config type, both derived from the table in settings.ts.

export { ConfigError, type MaxStartups, parseSecretsKey } from './kinds.ts';

/** Every setting of the service, read once from the environment at start (see settings.ts). */
export type Config = {
  -readonly [K in keyof typeof SETTINGS]: (typeof SETTINGS)[K] extends Setting<infer T> ? T : never;
};

type Env = Record<string, string | undefined>;

/** Reads and validates the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const config: Record<string, unknown> = {};
  const earlier: Record<string, unknown> = {};
  for (const [field, { env: name, kind }] of Object.entries(SETTINGS)) {
    const value = kind.read(env[name], name, earlier);
    config[field] = value;
    earlier[name] = value;
  }
  return config as Config;
}
