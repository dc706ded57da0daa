import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../shared/errors.ts';
import { RESOURCES } from './resource-list.ts';
import type { ExtraRoute, JsonSchema, Resource } from './resource-types.ts';
import { TOP_LEVEL_ROUTES } from './resources.ts';

// The OpenAPI 3.1 document of the REST API, built once at start from the resource declarations
// (resources.ts) and served at GET /openapi.json. A test validates it and checks that its paths
// and methods are exactly the routes the app serves.

type Operation = Record<string, unknown>;

const ERROR_EXAMPLE = {
  error_code: 'ERR_NOT_FOUND',
  status_code: 404,
  msg: 'API key "ak_06h0000000000000000000000" was not found',
  details: { operation_id: 'op_06h0000000000000000000000', id: 'ak_06h0000000000000000000000' },
};

/** The error body of every 4xx/5xx (README "Errors"). */
const ERROR_SCHEMA: JsonSchema = {
  type: 'object',
  properties: {
    error_code: { enum: Object.keys(ERROR_CODES) },
    status_code: { type: 'integer' },
    msg: { type: 'string' },
    details: {
      type: 'object',
      properties: { operation_id: { type: 'string' } },
      required: ['operation_id'],
    },
  },
  required: ['error_code', 'status_code', 'msg', 'details'],
  examples: [ERROR_EXAMPLE],
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

/** `API key` → `APIKey`, `event destination` → `EventDestination`. */
function schemaName(resource: Resource): string {
  return resource.title.replace(/(^| )(\w)/g, (_match, _space, letter: string) =>
    letter.toUpperCase(),
  );
}

/** The object schema of some of a resource's fields. */
function objectOf(resource: Resource, pick: (name: string) => boolean, required: string[]) {
  const properties: Record<string, JsonSchema> = {};
  for (const [name, field] of Object.entries(resource.fields)) {
    if (!pick(name)) continue;
    properties[name] = {
      ...field.schema,
      description: field.doc,
      ...(field.serverAssigned ? { readOnly: true } : {}),
    };
  }
  return { type: 'object', properties, required: required.filter(pick) };
}

/** The resource as shown, the create and update bodies and the list page. */
function schemasOf(resource: Resource): Record<string, JsonSchema> {
  const name = schemaName(resource);
  const fields = Object.entries(resource.fields);
  const shown = fields.filter(([, f]) => !f.writeOnly && !f.sometimes).map(([n]) => n);
  const taken = fields.filter(([, f]) => !f.serverAssigned).map(([n]) => n);
  const updatable = taken.filter((n) => resource.fields[n].notUpdatable === undefined);
  const required = taken.filter((n) => resource.fields[n].required);
  const field = (n: string) => resource.fields[n];
  return {
    [name]: objectOf(resource, (n) => !field(n).writeOnly, shown),
    [`${name}Create`]: {
      ...objectOf(resource, (n) => taken.includes(n), required),
      additionalProperties: false,
    },
    [`${name}Update`]: {
      ...objectOf(resource, (n) => updatable.includes(n) || n === 'id', []),
      additionalProperties: false,
    },
    [`${name}List`]: {
      type: 'object',
      properties: {
        [resource.listKey]: { type: 'array', items: ref(name) },
        uri: { type: 'string' },
        next_page_uri: { type: ['string', 'null'] },
      },
      required: [resource.listKey, 'uri', 'next_page_uri'],
    },
  };
}

function pathParams(path: string) {
  return [...path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
}

function queryParams(query: Record<string, string> = {}) {
  return Object.entries(query).map(([name, description]) => ({
    name,
    in: 'query',
    description,
    schema: { type: 'string' },
  }));
}

/** One operation: its id, parameters, body and answers (every error answers the error body). */
function operation(
  operationId: string,
  path: string,
  route: Omit<ExtraRoute, 'name' | 'method' | 'path'>,
): Operation {
  const success =
    route.status === 204
      ? { description: 'done; no body' }
      : route.stream
        ? {
            description: "Server-Sent Events; each event's data is JSON of this schema",
            content: { 'text/event-stream': { schema: route.response ?? { type: 'object' } } },
          }
        : { description: 'OK', content: json(route.response ?? { type: 'object' }) };
  return {
    operationId,
    summary: route.summary,
    parameters: [...pathParams(path), ...queryParams(route.query)],
    ...(route.request === undefined ? {} : { requestBody: { content: json(route.request) } }),
    responses: { [route.status]: success, default: { $ref: '#/components/responses/Error' } },
  };
}

/** The CRUD operations of a resource and its extra routes, by path and method. */
function pathsOf(resource: Resource): Record<string, Record<string, Operation>> {
  const name = schemaName(resource);
  const collection = `/${resource.path}`;
  const item = `${collection}/{id}`;
  const title = resource.title;
  const titles = title.endsWith('s') ? `${title}es` : `${title}s`;
  const paths: Record<string, Record<string, Operation>> = {
    [collection]: {
      post: operation(`${name}.create`, collection, {
        summary: `Create an ${title}`,
        status: 201,
        request: ref(`${name}Create`),
        response: ref(name),
      }),
      get: operation(`${name}.list`, collection, {
        summary: `List ${titles}, newest first`,
        status: 200,
        response: ref(`${name}List`),
        query: {
          limit: '1..100, default 100',
          before_id: 'the last id of the previous page (ngrok’s TypeScript client: beforeId)',
        },
      }),
    },
    [item]: {
      get: operation(`${name}.get`, item, {
        summary: `Get an ${title}`,
        status: 200,
        response: ref(name),
      }),
      patch: operation(`${name}.update`, item, {
        summary: `Change an ${title}; omitted fields stay`,
        status: 200,
        request: ref(`${name}Update`),
        response: ref(name),
      }),
      delete: operation(`${name}.delete`, item, {
        summary: `Delete an ${title}`,
        status: 204,
        query: resource.deleteQuery,
      }),
    },
  };
  for (const route of resource.extraRoutes ?? []) {
    const path = `${collection}${route.path}`;
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(`${name}.${route.name}`, path, route);
  }
  return paths;
}

/** The OpenAPI 3.1 document of the REST API served at `publicUrl`. */
export function openApiDocument(publicUrl: string): Record<string, unknown> {
  const { version } = JSON.parse(
    readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  const schemas: Record<string, JsonSchema> = { Error: ERROR_SCHEMA };
  const paths: Record<string, unknown> = {};
  for (const resource of RESOURCES) {
    Object.assign(schemas, schemasOf(resource));
    Object.assign(paths, pathsOf(resource));
  }
  for (const route of TOP_LEVEL_ROUTES) {
    const operationId = route.name.replace(/^\w/, (letter) => letter.toUpperCase());
    paths[route.path] = { [route.method.toLowerCase()]: operation(operationId, route.path, route) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Agent Ingress API',
      version,
      description: 'ngrok-compatible control plane: see README "REST API".',
    },
    servers: [{ url: publicUrl }],
    security: [{ bearer: [] }],
    paths,
    components: {
      schemas,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      responses: {
        Error: {
          description: 'the error body; details.operation_id is also sent as Ngrok-Operation-Id',
          content: { 'application/json': { schema: ref('Error'), example: ERROR_EXAMPLE } },
        },
      },
    },
  };
}
