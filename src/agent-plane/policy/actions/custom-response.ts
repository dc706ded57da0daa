import { defineAction, HEADER_MAP_SCHEMA } from '../action.ts';
import { compileHeaders, renderHeaders } from './headers.ts';

// custom-response: ends the phase with an answer of the policy's own: status, body and headers,
// each string with `${…}`.

interface Config {
  status_code?: number;
  body?: string;
  headers?: Record<string, string>;
}

export const CUSTOM_RESPONSE = defineAction<Config>({
  type: 'custom-response',
  phases: ['on_http_request', 'on_http_response'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      status_code: { type: 'integer', minimum: 200, maximum: 599 },
      body: { type: 'string', maxLength: 32768 },
      headers: HEADER_MAP_SCHEMA,
    },
  },
  compile(config, ctx) {
    const statusCode = config.status_code ?? 200;
    const body = ctx.template(config.body ?? '', 'body');
    const headers = compileHeaders(config.headers ?? {}, ctx);
    return (x) => {
      x.answer = {
        statusCode,
        headers: renderHeaders(headers, x.values),
        body: body.render(x.values),
      };
      return 'stop';
    };
  },
});
