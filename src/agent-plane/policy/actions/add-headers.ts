import { defineAction, HEADER_MAP_SCHEMA } from '../action.ts';
import { appendValue } from '../exchange.ts';
import { compileHeaders } from './headers.ts';

// add-headers: adds fields to the request going upstream (on_http_request) or to the answer
// going back (on_http_response); a field already there keeps its values and gets one more.

export const ADD_HEADERS = defineAction<{ headers: Record<string, string> }>({
  type: 'add-headers',
  phases: ['on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['headers'],
    properties: { headers: { ...HEADER_MAP_SCHEMA, minProperties: 1 } },
  },
  compile(config, ctx) {
    const headers = compileHeaders(config.headers, ctx);
    return (x) => {
      const target = ctx.phase === 'on_http_request' ? x.request?.headers : x.response?.headers;
      if (target === undefined) return 'continue';
      for (const [name, template] of headers) {
        appendValue(target, name, template.render(x.values));
      }
      return 'continue';
    };
  },
});
