import { isAbsolute, relative, resolve, sep } from 'node:path';
import { integer, object, type Settings, SinkConfigError } from '../settings.ts';
import type { SinkContext } from '../types.ts';

/** Default rotation size: large enough for efficient readers, small enough to ship. */
export const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024;
/** Default rotation age: a quiet destination still produces a closed file every hour. */
export const DEFAULT_MAX_FILE_AGE_MS = 60 * 60 * 1000;

/** A file destination's settings. */
export const FILE_SETTINGS = object(
  {
    path: {
      type: 'string',
      description: "directory of the NDJSON files, relative to the account's directory",
    },
    max_file_bytes: {
      type: 'number',
      minimum: 1,
      default: DEFAULT_MAX_FILE_BYTES,
      description: 'a file is closed before it would grow past this size',
    },
    max_file_age_ms: {
      type: 'number',
      minimum: 1,
      default: DEFAULT_MAX_FILE_AGE_MS,
      description: 'a file is closed this long after it was opened',
    },
  },
  ['path'],
);

/** Validated settings with defaults filled in and the directory resolved. */
export interface FileSinkConfig {
  /** The account's directory: `dir` is inside it, and nothing from it down may be a symlink. */
  root: string;
  dir: string;
  maxFileBytes: number;
  maxFileAgeMs: number;
}

const fail = (message: string, setting?: string) => new SinkConfigError('file', message, setting);

/** The directory `path` names under `base`, or undefined for a path that leaves it. */
export function dirInside(base: string, path: string): string | undefined {
  const dir = resolve(base, path);
  const rel = relative(base, dir);
  return rel.split(sep)[0] !== '..' && !isAbsolute(rel) ? dir : undefined;
}

/** Validates settings: an absolute path, or one not naming a directory inside the account's, is refused. */
export function parseFileSinkConfig(settings: Settings, context: SinkContext): FileSinkConfig {
  const { path } = settings;
  if (typeof path !== 'string' || path.trim() === '') {
    throw fail('path must be a non-empty string', 'path');
  }
  if (path.includes('\0')) throw fail('path must not contain NUL', 'path');
  if (isAbsolute(path)) throw fail(`path must be relative to the account's directory`, 'path');
  const root = resolve(context.accountDir);
  const dir = dirInside(root, path);
  if (dir === undefined) {
    throw fail(`path ${JSON.stringify(path)} escapes the account's directory`, 'path');
  }
  if (dir === root) {
    throw fail("path must name a directory inside the account's directory, not itself", 'path');
  }
  return {
    root,
    dir,
    maxFileBytes: integer('file', FILE_SETTINGS, settings, 'max_file_bytes'),
    maxFileAgeMs: integer('file', FILE_SETTINGS, settings, 'max_file_age_ms'),
  };
}
