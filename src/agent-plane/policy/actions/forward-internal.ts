import { defineAction } from '../action.ts';

// forward-internal: sends the request to an internal endpoint of the same account (a URL whose
// host ends in `.internal`, bound by an agent with `ssh -R <name>.internal:80:…`); the edge
// resolves it within the account only. `on_error: continue` lets the policy go on when that
// endpoint is not online; `halt` (the default) answers 502.

interface Config {
  url: string;
  on_error?: 'halt' | 'continue';
  binding?: string;
}

/** Whether a URL names an internal endpoint. */
export function isInternalUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname.endsWith('.internal')
    );
  } catch {
    return false;
  }
}

export const FORWARD_INTERNAL = defineAction<Config>({
  type: 'forward-internal',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['url'],
    properties: {
      url: { type: 'string', maxLength: 2048 },
      on_error: { enum: ['halt', 'continue'] },
      binding: { enum: ['internal'] },
    },
  },
  compile(config, ctx) {
    const url = ctx.template(config.url, 'url');
    if (url.constant !== undefined && !isInternalUrl(url.constant)) {
      ctx.fail(
        'url',
        `'${url.constant}' is not an internal endpoint's URL (its host ends in .internal)`,
      );
    }
    const onError = config.on_error ?? 'halt';
    return (x) => {
      x.forward = { url: url.render(x.values), onError };
      return 'stop';
    };
  },
});
