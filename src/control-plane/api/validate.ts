import type { FastifyRequest } from 'fastify';
import { AppError } from '../../shared/errors.ts';
import { bodySchema, firstError, toAppError } from './body-schema.ts';
import type { JsonObject, JsonSchema, Resource, ShapeCodes } from './resource-types.ts';

/** A JSON object from a request body, checked field by field by the functions below. */
/** Checks that `value` is a JSON object holding only `allowed` keys; `where` prefixes messages. */
export function objectWith(value: unknown, allowed: readonly string[], where = ''): JsonObject {
  const properties = Object.fromEntries(allowed.map((key) => [key, {}]));
  checkShape(
    value,
    { type: 'object', properties, additionalProperties: false },
    where,
    FIELD_CODES,
  );
  return value as JsonObject;
}

/** The codes of a request field's shape errors. */
export const FIELD_CODES: ShapeCodes = {
  invalid: 'ERR_INVALID_FIELD',
  missing: 'ERR_MISSING_FIELD',
};

/**
 * Checks `value` against a JSON Schema with Ajv (compiled once per schema, on first use) and
 * throws the first error as the catalogue says: a key the shape does not take is
 * ERR_UNKNOWN_FIELD, a required key not given `codes.missing`, a value of another type
 * `codes.invalid`, text over its bound ERR_FIELD_TOO_LONG, a field that cannot change
 * ERR_FIELD_NOT_UPDATABLE; `where` is the value's dotted name ('' for a request body).
 */
export function checkShape(
  value: unknown,
  schema: JsonSchema,
  where: string,
  codes: ShapeCodes,
): void {
  const error = firstError(value, schema);
  if (error !== undefined) throw toAppError(error, where, codes);
}

/** A request body read against its resource's declaration. */
export interface ReadBody {
  /** The whole body, checked. */
  body: JsonObject;
  /** The declared text fields given; undefined when not given. */
  text: Record<string, string | undefined>;
}

/**
 * Reads a create or update body as `resource` declares it (bodySchema): only fields it takes,
 * required ones present, each of its type and within its bounds. A create whose resource
 * requires nothing may omit the body.
 */
export function readBody(value: unknown, resource: Resource, mode: 'create' | 'update'): ReadBody {
  const schema = bodySchema(resource, mode);
  const optional = mode === 'create' && (schema.required as string[]).length === 0;
  const body = (value === undefined && optional ? {} : value) as JsonObject;
  checkShape(body, schema, '', FIELD_CODES);
  const text: Record<string, string | undefined> = {};
  for (const [name, field] of Object.entries(resource.fields)) {
    if (field.text !== undefined) text[name] = body[name] as string | undefined;
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
