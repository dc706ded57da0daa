import { defineAction } from '../action.ts';
import type { Template } from '../interpolate.ts';
import { fromCel } from '../macros.ts';

// log: adds its metadata (strings with `${…}`, other JSON values as written) to the traffic
// event's `traffic_policy.logs`, one entry per log action that ran.

export const LOG = defineAction<{ metadata: Record<string, unknown> }>({
  type: 'log',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['metadata'],
    properties: { metadata: { type: 'object', maxProperties: 64 } },
  },
  compile(config, ctx) {
    const text = JSON.stringify(config.metadata);
    if (text.length > 16384) ctx.fail('metadata', 'metadata is over 16384 bytes of JSON');
    const entries = Object.entries(config.metadata).map(([key, value]) => ({
      key,
      value: typeof value === 'string' ? ctx.template(value, `metadata.${key}`) : value,
      templated: typeof value === 'string',
    }));
    return (x) => {
      const out: Record<string, unknown> = {};
      for (const e of entries) {
        out[e.key] = e.templated ? (e.value as Template).render(x.values) : fromCel(e.value);
      }
      x.decisions.logs.push(out);
      return 'continue';
    };
  },
});
