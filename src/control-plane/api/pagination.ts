import type { FastifyInstance } from 'fastify';
import { AppError } from '../../shared/errors.ts';
import { isId } from '../../shared/ids.ts';
import type { ApiDeps } from './deps.ts';
import type { Resource } from './resource-types.ts';

/** The list parameters every list route takes: `limit` 1..100 (default 100) and `before_id`. */
export interface PageQuery {
  limit: number;
  beforeId: string | undefined;
}

const MAX_LIMIT = 100;

/** Parses `?limit=&before_id=` (or ngrok's TypeScript client's `beforeId`) for ids with `prefix`. */
export function parsePageQuery(query: unknown, prefix: string): PageQuery {
  const { beforeId: camel, ...params } = (query ?? {}) as Record<string, unknown>;
  if (camel !== undefined) params.before_id ??= camel;
  for (const key of Object.keys(params)) {
    if (key !== 'limit' && key !== 'before_id') {
      throw new AppError(
        'ERR_INVALID_QUERY',
        `unknown query parameter "${key}"; allowed: limit, before_id`,
        {
          parameter: key,
        },
      );
    }
  }
  let limit = MAX_LIMIT;
  if (params.limit !== undefined) {
    const raw = params.limit;
    if (
      typeof raw !== 'string' ||
      !/^\d{1,4}$/.test(raw) ||
      Number(raw) < 1 ||
      Number(raw) > MAX_LIMIT
    ) {
      throw new AppError(
        'ERR_INVALID_QUERY',
        `"limit" must be a whole number from 1 to ${MAX_LIMIT}`,
        {
          parameter: 'limit',
        },
      );
    }
    limit = Number(raw);
  }
  const beforeId = params.before_id;
  if (beforeId !== undefined && (typeof beforeId !== 'string' || !isId(beforeId, prefix))) {
    throw new AppError('ERR_INVALID_QUERY', `"before_id" must be an id of the form ${prefix}_…`, {
      parameter: 'before_id',
    });
  }
  return { limit, beforeId: beforeId as string | undefined };
}

/** The `uri` and `next_page_uri` of a list page. */
export function pageLinks(
  listUri: string,
  query: PageQuery,
  lastId: string | undefined,
  more: boolean,
): { uri: string; next_page_uri: string | null } {
  const link = (beforeId: string | undefined) => {
    const params = new URLSearchParams();
    if (query.limit !== MAX_LIMIT) params.set('limit', String(query.limit));
    if (beforeId !== undefined) params.set('before_id', beforeId);
    const search = params.toString();
    return search === '' ? listUri : `${listUri}?${search}`;
  };
  return {
    uri: link(query.beforeId),
    next_page_uri: more && lastId !== undefined ? link(lastId) : null,
  };
}

/** A page of an account's objects, newest first; `more` when another page follows. */
export type PageReader<Row> = (
  accountId: string,
  limit: number,
  beforeId: string | undefined,
) => Promise<{ rows: Row[]; more: boolean }>;

/**
 * GET /<resource>: a page of the caller's objects, newest first, under the resource's list key;
 * `present` shows a page's rows.
 */
export function listRoute<Row extends { id: string }>(
  app: FastifyInstance,
  { config }: ApiDeps,
  resource: Resource,
  read: PageReader<Row>,
  present: (rows: Row[]) => unknown[] | Promise<unknown[]>,
): void {
  const listUri = `${config.publicUrl}/${resource.path}`;
  app.get(`/${resource.path}`, async (request) => {
    const query = parsePageQuery(request.query, resource.idPrefix);
    const page = await read(request.caller.accountId, query.limit, query.beforeId);
    return {
      [resource.listKey]: await present(page.rows),
      ...pageLinks(listUri, query, page.rows.at(-1)?.id, page.more),
    };
  });
}
