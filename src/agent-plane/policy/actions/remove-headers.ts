import { defineAction } from '../action.ts';

// remove-headers: removes fields (by name, any case) from the request going upstream or from
// the answer going back.

export const REMOVE_HEADERS = defineAction<{ headers: string[] }>({
  type: 'remove-headers',
  phases: ['on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['headers'],
    properties: {
      headers: {
        type: 'array',
        minItems: 1,
        maxItems: 64,
        items: { type: 'string', minLength: 1 },
      },
    },
  },
  compile(config, ctx) {
    const names = config.headers.map((h) => h.toLowerCase());
    return (x) => {
      const target = ctx.phase === 'on_http_request' ? x.request?.headers : x.response?.headers;
      if (target !== undefined) for (const name of names) delete target[name];
      return 'continue';
    };
  },
});
