import type { ErrorCode } from '../../shared/errors.ts';

// The shapes REST resources are declared in (resources.ts declares them): types only, so the
// declarations, the request checks and the OpenAPI document can share them without a circle.

/** A request body as JSON, before it is checked. */
export type JsonObject = Record<string, unknown>;

/** A JSON Schema (2020-12, as OpenAPI 3.1 uses it). */
export type JsonSchema = Record<string, unknown>;

/** One field of a resource. */
export interface Field {
  /** Its JSON Schema; bounds checked in code (UTF-8 bytes) are also stated here for readers. */
  schema: JsonSchema;
  /** A plain string field the generic reader checks; other fields are read by the route. */
  text?: TextBound;
  /** Must be given on create. */
  required?: boolean;
  /** Taken on create but never on update; the text says what to do instead. */
  notUpdatable?: string;
  /** Set by the service: shown, never taken. */
  serverAssigned?: boolean;
  /** Taken, never shown (secrets). */
  writeOnly?: boolean;
  /** Shown only in the response that creates the object (an API key's token). */
  shownOnce?: boolean;
  /** Read by the route itself, with codes of its own (a destination's target); any JSON here. */
  checkedByRoute?: boolean;
  /** Shown only when known (a destination's health, when the pipeline reports it). */
  sometimes?: boolean;
  /**
   * An id (or a list of ids, as the schema says) of the caller's objects at `path`, which must
   * exist; stored and shown under `shownAs` as `{id, uri}` (or a list of them).
   */
  ref?: { path: string; shownAs: string };
  /** One line for the OpenAPI document and the CLI's help. */
  doc: string;
}

/** An action or sub-collection route a resource has beyond CRUD, for the OpenAPI document. */
export interface ExtraRoute {
  /** Its operation's name, e.g. `sources.create` (OpenAPI operationId `<Resource>.<name>`). */
  name: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Relative to the resource's path, e.g. `/{id}/test`. */
  path: string;
  summary: string;
  /** Status of success (204: no body). */
  status: 200 | 201 | 204;
  request?: JsonSchema;
  response?: JsonSchema;
  query?: Record<string, string>;
  /** Answers a stream of Server-Sent Events (text/event-stream) rather than one JSON body. */
  stream?: boolean;
}

/** One REST resource. */
export interface Resource {
  /** Path segment, e.g. `api_keys`; also its table, or its kind in account_objects. */
  path: string;
  /** How messages name one object, e.g. `API key`. */
  title: string;
  /** The prefix of its ids (`ak_…`). */
  idPrefix: string;
  /** The key a list answer holds its objects under (ngrok's). */
  listKey: string;
  /** Its audit events are `<audit>_created.v0`, `_updated.v0`, `_deleted.v0`. */
  audit: string;
  fields: Record<string, Field>;
  /**
   * A valid create body, for examples and generated tests (the isolation sweep, fuzzing): `tag`
   * makes it unique, `idOf` names an existing object of a resource it refers to.
   */
  example: (make: {
    tag: string;
    idOf: (path: string) => string;
    /** A domain the account holds (an Agent Ingress's), for a resource on one of its names. */
    held?: string;
  }) => Record<string, unknown>;
  /** Query parameters DELETE takes, by name and meaning. */
  deleteQuery?: Record<string, string>;
  extraRoutes?: ExtraRoute[];
}

/** The bound of a text field, in UTF-8 bytes or in characters. */
export interface TextBound {
  maxBytes?: number;
  maxChars?: number;
}

/** The codes of a shape's errors: a value of the wrong type, a required value not given. */
export interface ShapeCodes {
  invalid: ErrorCode;
  missing: ErrorCode;
}
