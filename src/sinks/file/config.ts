import { isAbsolute, relative, resolve, sep } from 'node:path';

/** A file destination's settings as configured (sizes optional). */
export interface FileSinkSettings {
  /** Directory for the NDJSON files, relative to the account's directory. */
  path: string;
  maxFileBytes?: number;
  maxFileAgeMs?: number;
}

/** Validated settings with defaults filled in and the directory resolved. */
export interface FileSinkConfig {
  /** The account's directory: `dir` is inside it, and nothing from it down may be a symlink. */
  root: string;
  dir: string;
  maxFileBytes: number;
  maxFileAgeMs: number;
}

/** Where paths are anchored: the account's directory, `DATA_DIR/events/<account_id>`. */
export interface FileSinkConfigContext {
  baseDir: string;
}

/** A file destination whose settings cannot be used; the message names the setting. */
export class FileSinkConfigError extends Error {
  constructor(message: string) {
    super(`file destination: ${message}`);
    this.name = 'FileSinkConfigError';
  }
}

/** Default rotation size: large enough for efficient readers, small enough to ship. */
export const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024;
/** Default rotation age: a quiet destination still produces a closed file every hour. */
export const DEFAULT_MAX_FILE_AGE_MS = 60 * 60 * 1000;

function positiveInt(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new FileSinkConfigError(`${name} must be a positive integer`);
  }
  return value;
}

function inside(base: string, target: string): boolean {
  const rel = relative(base, target);
  return rel.split(sep)[0] !== '..' && !isAbsolute(rel);
}

/** Validates settings: an absolute path, or one that climbs out of the base directory, is refused. */
export function parseFileSinkConfig(
  settings: FileSinkSettings,
  context: FileSinkConfigContext,
): FileSinkConfig {
  const { path } = settings;
  if (typeof path !== 'string' || path.trim() === '') {
    throw new FileSinkConfigError('path must be a non-empty string');
  }
  if (path.includes('\0')) throw new FileSinkConfigError('path must not contain NUL');
  if (isAbsolute(path)) {
    throw new FileSinkConfigError(`path must be relative to the account's directory`);
  }
  const root = resolve(context.baseDir);
  const dir = resolve(root, path);
  if (!inside(root, dir)) {
    throw new FileSinkConfigError(`path ${JSON.stringify(path)} escapes the account's directory`);
  }
  return {
    root,
    dir,
    maxFileBytes: positiveInt(settings.maxFileBytes, DEFAULT_MAX_FILE_BYTES, 'maxFileBytes'),
    maxFileAgeMs: positiveInt(settings.maxFileAgeMs, DEFAULT_MAX_FILE_AGE_MS, 'maxFileAgeMs'),
  };
}
