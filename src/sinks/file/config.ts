import { isAbsolute, relative, resolve, sep } from 'node:path';

/** A file destination's settings as configured (sizes optional). */
export interface FileSinkSettings {
  /** Directory for the NDJSON files: absolute, or relative to the service's data directory. */
  path: string;
  maxFileBytes?: number;
  maxFileAgeMs?: number;
}

/** Validated settings with defaults filled in and the directory resolved. */
export interface FileSinkConfig {
  dir: string;
  maxFileBytes: number;
  maxFileAgeMs: number;
}

/** Where relative paths are anchored, and whether an absolute path may leave that anchor. */
export interface FileSinkConfigContext {
  baseDir: string;
  /** Operator-written configuration may name any absolute directory; API-created ones should not. */
  allowAbsolute?: boolean;
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

/** Validates settings: a relative path that climbs out of the base directory is refused. */
export function parseFileSinkConfig(
  settings: FileSinkSettings,
  context: FileSinkConfigContext,
): FileSinkConfig {
  const { path } = settings;
  if (typeof path !== 'string' || path.trim() === '') {
    throw new FileSinkConfigError('path must be a non-empty string');
  }
  if (path.includes('\0')) throw new FileSinkConfigError('path must not contain NUL');
  const base = resolve(context.baseDir);
  const dir = resolve(base, path);
  const allowAbsolute = context.allowAbsolute ?? true;
  if (!(isAbsolute(path) && allowAbsolute) && !inside(base, dir)) {
    throw new FileSinkConfigError(`path ${JSON.stringify(path)} escapes the data directory`);
  }
  return {
    dir,
    maxFileBytes: positiveInt(settings.maxFileBytes, DEFAULT_MAX_FILE_BYTES, 'maxFileBytes'),
    maxFileAgeMs: positiveInt(settings.maxFileAgeMs, DEFAULT_MAX_FILE_AGE_MS, 'maxFileAgeMs'),
  };
}
