import { defineAction } from '../action.ts';
import type { Exchange } from '../exchange.ts';

// forward-internal: sends the request to an internal endpoint of the same account (a URL whose
// host ends in `.internal`, bound by `ssh -R <name>.internal:80:…` or an ngrok agent), whose own
// policy then runs. The edge resolves the name within the account only. When that endpoint is
// not online, `on_error: halt` (the default) answers as ngrok does for an offline endpoint (404,
// ERR_NGROK_3200) and `continue` lets the policy go on with its next action.

interface Config {
  url: string;
  on_error?: 'halt' | 'continue';
  binding?: string;
}

/** The internal endpoint's hostname a URL names, or undefined when it names none. */
export function internalHostOf(text: string): string | undefined {
  const url = URL.parse(text);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) return undefined;
  return url.hostname.endsWith('.internal') ? url.hostname : undefined;
}

/** Whether a URL names an internal endpoint. */
export function isInternalUrl(text: string): boolean {
  return internalHostOf(text) !== undefined;
}

/** ngrok's answer when the endpoint a request is for is not online. */
function offline(x: Exchange, url: string, why: string): 'stop' {
  x.answer = {
    statusCode: 404,
    headers: { 'content-type': ['text/plain; charset=utf-8'] },
    body: `The endpoint ${url} is offline: ${why}.\n\nERR_NGROK_3200\n`,
  };
  return 'stop';
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
    const halt = (config.on_error ?? 'halt') === 'halt';
    return (x) => {
      const target = url.render(x.values);
      const hostname = internalHostOf(target);
      let why: string | undefined;
      if (hostname === undefined) why = 'it is not an internal endpoint';
      else if (x.internalOnline === undefined) why = 'an internal endpoint does not forward again';
      else if (!x.internalOnline(hostname)) why = 'no agent serves it';
      if (why === undefined) {
        x.forward = { url: target, hostname: hostname! };
        return 'stop';
      }
      return halt ? offline(x, target, why) : 'continue';
    };
  },
});
