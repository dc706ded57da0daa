import type { FastifyRequest } from 'fastify';
import { AppError, type ErrorCode } from '../errors.ts';
import type { JsonSchema, Resource } from './resources.ts';

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

/** The bound of a text field, in UTF-8 bytes or in characters. */
export interface TextBound {
  maxBytes?: number;
  maxChars?: number;
}

/** Reads an optional string field and enforces its UTF-8 byte or character bound. */
function textField(body: JsonObject, field: string, bound: TextBound): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') {
    throw new AppError('ERR_INVALID_FIELD', `"${field}" must be a string`, { field });
  }
  const { maxBytes, maxChars } = bound;
  if (maxBytes !== undefined && Buffer.byteLength(value, 'utf8') > maxBytes) {
    throw new AppError(
      'ERR_FIELD_TOO_LONG',
      `"${field}" must be at most ${maxBytes} bytes of UTF-8`,
      {
        field,
        max_bytes: maxBytes,
      },
    );
  }
  if (maxChars !== undefined && [...value].length > maxChars) {
    throw new AppError('ERR_FIELD_TOO_LONG', `"${field}" must be at most ${maxChars} characters`, {
      field,
      max_chars: maxChars,
    });
  }
  return value;
}

/** The codes of a shape's errors: a value of the wrong type, a required value not given. */
export interface ShapeCodes {
  invalid: ErrorCode;
  missing: ErrorCode;
}

/** The codes of a request field's shape errors. */
export const FIELD_CODES: ShapeCodes = {
  invalid: 'ERR_INVALID_FIELD',
  missing: 'ERR_MISSING_FIELD',
};

const KINDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
  array: 'a list of strings',
  object: 'an object',
};

/** True when `value` has the JSON type `schema` declares (lists: of items of their type). */
function fits(value: unknown, schema: JsonSchema): boolean {
  if (schema.enum !== undefined) return (schema.enum as unknown[]).includes(value);
  if (Array.isArray(schema.type)) {
    return schema.type.some((type) => fits(value, { ...schema, type }));
  }
  switch (schema.type) {
    case 'array':
      return Array.isArray(value) && value.every((item) => fits(item, schema.items as JsonSchema));
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value);
    default:
      return typeof value === schema.type;
  }
}

/**
 * Checks `value` against a declared shape (a JSON Schema of objects, strings, numbers, booleans
 * and lists of strings): a key the shape does not take is ERR_UNKNOWN_FIELD, a required key not
 * given or a value of another type gets `codes`; `where` is the value's dotted name.
 */
export function checkShape(
  value: unknown,
  schema: JsonSchema,
  where: string,
  codes: ShapeCodes,
): void {
  if (!fits(value, schema)) {
    if (where === '') objectWith(value, []); // the request body itself: its own message
    const choices = (schema.enum as string[] | undefined)?.map((c) => `"${c}"`).join(', ');
    const oneOf = choices === undefined ? undefined : `one of ${choices}`;
    const types = [schema.type].flat() as string[];
    const kind = oneOf ?? types.map((type) => KINDS[type]).join(' or ');
    throw new AppError(codes.invalid, `"${where}" must be ${kind}`, { field: where });
  }
  if (value === null || typeof value !== 'object' || schema.properties === undefined) return;
  const properties = Object.entries(schema.properties as Record<string, JsonSchema>).filter(
    ([, property]) => property.readOnly !== true,
  );
  const body = objectWith(
    value,
    properties.map(([key]) => key),
    where,
  );
  const at = (key: string) => (where === '' ? key : `${where}.${key}`);
  for (const key of (schema.required ?? []) as string[]) {
    if (body[key] === undefined) {
      throw new AppError(codes.missing, `"${at(key)}" is required`, { field: at(key) });
    }
  }
  for (const [key, property] of properties) {
    if (body[key] !== undefined) checkShape(body[key], property, at(key), codes);
  }
}

/** A request body read against its resource's declaration: checked text fields, the rest raw. */
export interface ReadBody {
  /** The whole body, for the fields the route reads itself. */
  body: JsonObject;
  /** The declared text fields, checked (bounds, required); undefined when not given. */
  text: Record<string, string | undefined>;
}

/**
 * Reads a create or update body as `resource` declares it: only fields it takes (not
 * server-assigned; on update, not a field that cannot change), required ones present, text
 * fields within their bounds. A create whose resource requires nothing may omit the body.
 */
export function readBody(value: unknown, resource: Resource, mode: 'create' | 'update'): ReadBody {
  const taken = Object.entries(resource.fields).filter(([, field]) => !field.serverAssigned);
  if (mode === 'update' && value !== null && typeof value === 'object') {
    for (const [name, field] of taken) {
      if (field.notUpdatable !== undefined && name in value) {
        throw new AppError(
          'ERR_FIELD_NOT_UPDATABLE',
          `"${name}" cannot be changed; ${field.notUpdatable}`,
          { field: name },
        );
      }
    }
  }
  const fields = taken.filter(([, field]) => mode === 'create' || field.notUpdatable === undefined);
  const optional = mode === 'create' && !fields.some(([, field]) => field.required);
  const body = objectWith(
    value === undefined && optional ? {} : value,
    fields.map(([name]) => name),
  );
  const text: Record<string, string | undefined> = {};
  for (const [name, field] of fields) {
    if (mode === 'create' && field.required && body[name] === undefined) {
      throw new AppError('ERR_MISSING_FIELD', `"${name}" is required: ${field.doc}`, {
        field: name,
      });
    }
    if (field.text !== undefined) text[name] = textField(body, name, field.text);
  }
  return { body, text };
}

// PostgreSQL keeps neither U+0000 (in text or jsonb) nor an unpaired UTF-16 surrogate (in jsonb,
// where the audit event holds every stored value): such a string would make the store fail, a
// 500, instead of a 400 naming the field.
const UNSTORABLE = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when the store can keep `value` as it is (no NUL, no unpaired surrogate). */
export function isStorable(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/** A value inside a request body, with the way back to the body (for its dotted name). */
interface BodyNode {
  value: unknown;
  parent: BodyNode | undefined;
  key: string | number;
}

/** The dotted name of a body value, like `target.kafka.brokers[0]`. */
function bodyPath(node: BodyNode): string {
  const parts: string[] = [];
  for (let n = node; n.parent !== undefined; n = n.parent) {
    parts.push(typeof n.key === 'number' ? `[${n.key}]` : `.${n.key}`);
  }
  return parts.reverse().join('').replace(/^\./, '');
}

/**
 * A preValidation hook for the resource routes: a path parameter the store cannot hold names no
 * object (404); a body string it cannot hold is a 400 naming the field. The body is walked
 * without recursion (bodies nest as deep as MAX_BODY_BYTES allows).
 */
export async function rejectUnstorableStrings(request: FastifyRequest): Promise<void> {
  const params = (request.params ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(params)) {
    if (typeof value === 'string' && !isStorable(value)) {
      throw new AppError('ERR_NOT_FOUND', `no object has the ${name} ${JSON.stringify(value)}`, {
        [name]: value,
      });
    }
  }
  // A body that is not an object or a list is refused by objectWith, with a better message.
  if (request.body === null || typeof request.body !== 'object') return;
  const stack: BodyNode[] = [{ value: request.body, parent: undefined, key: '' }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const { value } = node;
    if (typeof value === 'string') {
      if (isStorable(value)) continue;
      const field = bodyPath(node);
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"${field}" must not contain U+0000 (NUL) or an unpaired UTF-16 surrogate`,
        { field },
      );
    }
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--)
        stack.push({ value: value[i], parent: node, key: i });
    } else {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        stack.push({ value: entries[i][1], parent: node, key: entries[i][0] });
      }
    }
  }
}

/**
 * A preValidation hook for ngrok's clients, which repeat the path's ids in the body (`id` on
 * PATCH, `subscription_id` and `type` on event sources): `echoes` maps such a body field to the
 * path parameter it repeats. An equal value is dropped; another is left for the route to refuse
 * (an unknown field, or a source type that cannot change).
 */
export function acceptPathEchoes(echoes: Record<string, string>) {
  return async (request: FastifyRequest): Promise<void> => {
    const params = (request.params ?? {}) as Record<string, string>;
    const body = request.body as JsonObject | null | undefined;
    if (body === null || typeof body !== 'object') return;
    for (const [field, param] of Object.entries(echoes)) {
      if (params[param] !== undefined && body[field] === params[param]) delete body[field];
    }
  };
}
