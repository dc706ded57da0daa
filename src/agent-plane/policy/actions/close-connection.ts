import { defineAction } from '../action.ts';

// close-connection: closes the client's connection at once, with no answer.

export const CLOSE_CONNECTION = defineAction<Record<string, never>>({
  type: 'close-connection',
  phases: ['on_tcp_connect', 'on_http_request'],
  schema: { type: 'object', additionalProperties: false, properties: {} },
  compile() {
    return (x) => {
      x.close = true;
      return 'stop';
    };
  },
});
