import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { RESOURCES } from '../api/resource-list.ts';
import type { ExtraRoute, JsonSchema, Resource } from '../api/resource-types.ts';
import { TOP_LEVEL_ROUTES } from '../api/resources.ts';
import { type Call, CliFailure, perform, render, targetFromEnv } from './api-http.ts';

// `cli api <resource> <operation> …`: one subcommand per declared resource (resources.ts), one
// per operation, and one option per field the operation takes, typed by the field's schema. No
// resource has code of its own here: a new declaration is a new subcommand.

/** sysexits.h EX_USAGE: the command line was wrong. */
export const EXIT_USAGE = 64;

type Method = Call['method'];
type Values = Record<string, unknown>;

/** The schema's types, e.g. ['object', 'null']. */
const typesOf = (schema: JsonSchema) => [schema.type ?? 'string'].flat() as string[];

/** JSON.parse, failing as a usage error. */
function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    throw new InvalidArgumentError('not valid JSON');
  }
}

/** `--json`'s text: a JSON object. */
function jsonObject(raw: string): Values {
  const value = parseJson(raw);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgumentError('must be a JSON object');
  }
  return value as Values;
}

/** Reads one option's text as its field's schema says: JSON objects, lists, numbers, booleans. */
function valueParser(schema: JsonSchema): (raw: string) => unknown {
  const types = typesOf(schema);
  if (types.includes('array')) {
    return (raw) =>
      raw.trim().startsWith('[')
        ? parseJson(raw)
        : raw.split(',').flatMap((item) => (item.trim() === '' ? [] : [item.trim()]));
  }
  if (types.includes('object')) return (raw) => parseJson(raw);
  if (types.includes('number') || types.includes('integer')) {
    return (raw) => {
      if (raw.trim() === '' || Number.isNaN(Number(raw))) {
        throw new InvalidArgumentError('must be a number');
      }
      return Number(raw);
    };
  }
  if (types.includes('boolean')) {
    return (raw) => {
      if (raw !== 'true' && raw !== 'false') throw new InvalidArgumentError('true or false');
      return raw === 'true';
    };
  }
  return (raw) => raw;
}

/** `destination_ids` → `--destination-ids`. */
const flagOf = (name: string) => `--${name.replaceAll('_', '-')}`;

/** Adds one option per body field; returns how to build the body from the parsed options. */
function bodyOptions(
  command: Command,
  fields: Record<string, { schema: JsonSchema; doc: string }>,
) {
  const byAttribute = new Map<string, string>();
  for (const [name, field] of Object.entries(fields)) {
    const types = typesOf(field.schema);
    const hint = types.includes('array')
      ? ' (comma-separated or JSON)'
      : types.includes('object')
        ? ' (JSON)'
        : '';
    const option = new Option(`${flagOf(name)} <value>`, `${field.doc}${hint}`).argParser(
      valueParser(field.schema),
    );
    byAttribute.set(option.attributeName(), name);
    command.addOption(option);
  }
  command.addOption(
    new Option(
      '--json <body>',
      'the whole request body as JSON; field options override it',
    ).argParser(jsonObject),
  );
  return (options: Values): Values => {
    const body = { ...((options.json as Values | undefined) ?? {}) };
    for (const [attribute, name] of byAttribute) {
      if (options[attribute] !== undefined) body[name] = options[attribute];
    }
    return body;
  };
}

/** Adds one option per query parameter; returns the query string of the parsed options. */
function queryOptions(command: Command, query: Record<string, string> = {}) {
  const byAttribute = new Map<string, string>();
  for (const [name, doc] of Object.entries(query)) {
    const option = new Option(`${flagOf(name)} <value>`, doc);
    byAttribute.set(option.attributeName(), name);
    command.addOption(option);
  }
  return (options: Values): string => {
    const search = new URLSearchParams();
    for (const [attribute, name] of byAttribute) {
      if (options[attribute] !== undefined) search.set(name, String(options[attribute]));
    }
    const text = search.toString();
    return text === '' ? '' : `?${text}`;
  };
}

/** One operation: its positional arguments are the path's `{params}`, in order. */
function operation(parent: Command, name: string, summary: string, path: string) {
  const params = [...path.matchAll(/\{(\w+)\}/g)].map(([, param]) => param);
  const command = parent.command(name).description(summary);
  for (const param of params) command.argument(`<${param}>`);
  command.addOption(
    new Option('-o, --output <format>', 'json or table').choices(['json', 'table']).default('json'),
  );
  const pathOf = (args: string[]) =>
    params.reduce((at, param, i) => at.replace(`{${param}}`, encodeURIComponent(args[i])), path);
  return { command, pathOf };
}

/** Runs `call` and prints its answer as `--output` says. */
function act(command: Command, build: (args: string[], options: Values) => Call): void {
  command.action(async () => {
    const options = command.opts();
    const call = build(command.args, options);
    const answer = await perform(targetFromEnv(), call);
    process.stdout.write(render(answer, options.output as 'json' | 'table'));
  });
}

/** The fields a create (or update) takes: not server-assigned (and updatable). */
function takenFields(resource: Resource, update: boolean) {
  return Object.fromEntries(
    Object.entries(resource.fields).filter(
      ([, field]) => !field.serverAssigned && !(update && field.notUpdatable !== undefined),
    ),
  );
}

/** The fields of an extra route's request body, without the ones only shown. */
function requestFields(route: ExtraRoute) {
  const properties = (route.request?.properties ?? {}) as Record<string, JsonSchema>;
  return Object.fromEntries(
    Object.entries(properties)
      .filter(([, schema]) => !schema.readOnly)
      .map(([name, schema]) => [name, { schema, doc: String(schema.description ?? name) }]),
  );
}

/** create, get, list, update, delete and the resource's extra routes. */
function resourceCommand(resource: Resource): Command {
  const collection = `/${resource.path}`;
  const item = `${collection}/{id}`;
  const { title } = resource;
  const command = commandNamed(resource.path).description(`${collection}: ${title} objects`);
  const dashed = resource.path.replaceAll('_', '-');
  if (dashed !== resource.path) command.alias(dashed);
  const crud: [string, Method, string, string][] = [
    ['create', 'POST', collection, `create an ${title}`],
    ['get', 'GET', item, `get an ${title}`],
    ['list', 'GET', collection, `list ${resource.path}, newest first`],
    ['update', 'PATCH', item, `change an ${title}; omitted fields stay`],
    ['delete', 'DELETE', item, `delete an ${title}`],
  ];
  for (const [name, method, path, summary] of crud) {
    const { command: op, pathOf } = operation(command, name, summary, path);
    const body =
      method === 'POST' || method === 'PATCH'
        ? bodyOptions(op, takenFields(resource, method === 'PATCH'))
        : undefined;
    const query = queryOptions(op, method === 'DELETE' ? resource.deleteQuery : undefined);
    if (name === 'list') {
      op.option('--limit <n>', 'objects per page (1..100)')
        .option('--before-id <id>', 'the last id of the previous page')
        .option('--all', 'follow next_page_uri and print every page as one list');
    }
    act(op, (args, options) => ({
      method,
      path: pathOf(args) + (name === 'list' ? listQuery(options) : query(options)),
      body: body?.(options),
      allPages: name === 'list' && options.all ? resource.listKey : undefined,
    }));
  }
  for (const route of resource.extraRoutes ?? []) {
    extraOperation(command, route.name.replaceAll('.', '-'), route, collection + route.path);
  }
  return command;
}

/** A declared route beyond CRUD as the operation `name` of `parent`. */
function extraOperation(parent: Command, name: string, route: ExtraRoute, path: string): void {
  const { command, pathOf } = operation(parent, name, route.summary, path);
  const body = route.request === undefined ? undefined : bodyOptions(command, requestFields(route));
  const query = queryOptions(command, route.query);
  act(command, (args, options) => ({
    method: route.method,
    path: pathOf(args) + query(options),
    body: body?.(options),
  }));
}

/** A command that throws instead of exiting on a usage error; its subcommands inherit that. */
const commandNamed = (name: string) =>
  new Command(name).exitOverride().showHelpAfterError('(add --help for usage)');

/** `?limit=…&before_id=…` of a list command's options. */
function listQuery(options: Values): string {
  const search = new URLSearchParams();
  if (options.limit !== undefined) search.set('limit', String(options.limit));
  if (options.beforeId !== undefined) search.set('before_id', String(options.beforeId));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

/** The `api` command: every declared resource, and each group of top-level routes. */
export function apiCommand(): Command {
  const api = commandNamed('api').description(
    'call a running service over HTTP (AGENT_INGRESS_URL, default http://127.0.0.1:8080, ' +
      'with the token in AGENT_INGRESS_API_KEY); prints JSON, or a table with --output table',
  );
  for (const resource of RESOURCES) api.addCommand(resourceCommand(resource));
  const groups = new Map<string, Command>();
  for (const route of TOP_LEVEL_ROUTES) {
    const [group, name] = route.name.split('.');
    if (!groups.has(group)) groups.set(group, api.command(group).description(route.summary));
    extraOperation(groups.get(group)!, name, route, route.path);
  }
  return api;
}

/** Runs `api …` (argv after `api`) and returns its exit status. */
export async function runApi(argv: string[]): Promise<number> {
  try {
    await apiCommand().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : EXIT_USAGE;
    if (error instanceof CliFailure) {
      process.stderr.write(`${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
}
