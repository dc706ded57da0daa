import { defineAction } from '../action.ts';
import { urlValues } from '../values.ts';
import { compileUrlPattern } from './url-pattern.ts';

// url-rewrite: changes the path and query the upstream gets (never the host: the request stays
// with this endpoint); later rules see the rewritten `req.url`.

interface Config {
  from?: string;
  to: string;
}

export const URL_REWRITE = defineAction<Config>({
  type: 'url-rewrite',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['to'],
    properties: {
      from: { type: 'string', maxLength: 2048 },
      to: { type: 'string', maxLength: 2048 },
    },
  },
  compile(config, ctx) {
    const pattern = compileUrlPattern(config, ctx);
    return (x) => {
      const req = x.values.req;
      if (req === undefined || x.request === undefined) return 'continue';
      const current = req.url as ReturnType<typeof urlValues>;
      const next = pattern.apply(current._string, x.values);
      if (next === undefined) return 'continue';
      let url: URL;
      try {
        url = new URL(next, current._string);
      } catch {
        return 'continue';
      }
      const target = `${url.pathname}${url.search}`;
      x.request.target = target;
      req.url = urlValues(current.scheme, current.authority, target);
      return 'continue';
    };
  },
});
