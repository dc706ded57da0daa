import { defineAction, HEADER_MAP_SCHEMA } from '../action.ts';
import { compileHeaders, renderHeaders } from './headers.ts';
import { compileUrlPattern } from './url-pattern.ts';

// redirect: answers with `Location` set to the rewritten URL (302 unless `status_code` says
// another 3xx); when `from` does not match, the request goes on.

interface Config {
  from?: string;
  to: string;
  status_code?: number;
  headers?: Record<string, string>;
}

export const REDIRECT = defineAction<Config>({
  type: 'redirect',
  phases: ['on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['to'],
    properties: {
      from: { type: 'string', maxLength: 2048 },
      to: { type: 'string', maxLength: 2048 },
      status_code: { type: 'integer', minimum: 300, maximum: 399 },
      headers: HEADER_MAP_SCHEMA,
    },
  },
  compile(config, ctx) {
    const pattern = compileUrlPattern(config, ctx);
    const headers = compileHeaders(config.headers ?? {}, ctx);
    const statusCode = config.status_code ?? 302;
    return (x) => {
      const url = x.values.req?.url as { _string: string } | undefined;
      const location = url === undefined ? undefined : pattern.apply(url._string, x.values);
      if (location === undefined) return 'continue';
      x.answer = {
        statusCode,
        headers: { ...renderHeaders(headers, x.values), location: [location] },
        body: '',
      };
      return 'stop';
    };
  },
});
