import { defineAction } from '../action.ts';

// deny: ends the phase refusing the traffic: an HTTP answer with `status_code` (403 unless
// set, no body), or, in on_tcp_connect, the connection closed.

export const DENY = defineAction<{ status_code?: number }>({
  type: 'deny',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: { status_code: { type: 'integer', minimum: 100, maximum: 599 } },
  },
  compile(config, ctx) {
    const statusCode = config.status_code ?? 403;
    if (ctx.phase === 'on_tcp_connect') {
      return (x) => {
        x.close = true;
        return 'stop';
      };
    }
    return (x) => {
      x.answer = { statusCode, headers: {}, body: '' };
      return 'stop';
    };
  },
});
