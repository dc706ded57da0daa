import { AppError } from '../errors.ts';

/** A JSON object from a request body, checked field by field by the functions below. */
export type JsonObject = Record<string, unknown>;

/** Checks that `value` is a JSON object holding only `allowed` keys; `where` prefixes messages. */
export function objectWith(value: unknown, allowed: readonly string[], where = ''): JsonObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      where === '' ? 'the request body must be a JSON object' : `${where} must be an object`,
      where === '' ? {} : { field: where },
    );
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      const field = where === '' ? key : `${where}.${key}`;
      throw new AppError(
        'ERR_UNKNOWN_FIELD',
        `unknown field "${field}"; allowed fields: ${allowed.join(', ')}`,
        { field },
      );
    }
  }
  return value as JsonObject;
}

/** Options of a string field: its byte or character bound and whether it must be present. */
export interface StringRule {
  maxBytes?: number;
  maxChars?: number;
  required?: boolean;
}

/** Reads an optional (or required) string field and enforces its UTF-8 byte or character bound. */
export function stringField(
  body: JsonObject,
  field: string,
  rule: StringRule & { required: true },
): string;
export function stringField(body: JsonObject, field: string, rule?: StringRule): string | undefined;
export function stringField(body: JsonObject, field: string, rule: StringRule = {}) {
  const value = body[field];
  if (value === undefined) {
    if (rule.required) throw new AppError('ERR_MISSING_FIELD', `"${field}" is required`, { field });
    return undefined;
  }
  if (typeof value !== 'string') {
    throw new AppError('ERR_INVALID_FIELD', `"${field}" must be a string`, { field });
  }
  if (rule.maxBytes !== undefined && Buffer.byteLength(value, 'utf8') > rule.maxBytes) {
    throw new AppError(
      'ERR_FIELD_TOO_LONG',
      `"${field}" must be at most ${rule.maxBytes} bytes of UTF-8`,
      { field, max_bytes: rule.maxBytes },
    );
  }
  if (rule.maxChars !== undefined && [...value].length > rule.maxChars) {
    throw new AppError(
      'ERR_FIELD_TOO_LONG',
      `"${field}" must be at most ${rule.maxChars} characters`,
      {
        field,
        max_chars: rule.maxChars,
      },
    );
  }
  return value;
}

/** Reads a string field that must be one of `choices`. */
export function choiceField<T extends string>(
  body: JsonObject,
  field: string,
  choices: readonly T[],
  where: string,
): T | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !choices.includes(value as T)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${where}" must be one of ${choices.map((c) => `"${c}"`).join(', ')}`,
      { field: where },
    );
  }
  return value as T;
}

/** The bounds SPEC.md sets on most resources' description and metadata. */
export const DESCRIPTION_BYTES = 255;
export const METADATA_BYTES = 4096;
