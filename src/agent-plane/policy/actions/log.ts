import { defineAction } from '../action.ts';
import { fromCel } from '../macros.ts';

// log: adds its metadata (strings with `${…}`, other JSON values as written) to the traffic
// event's `traffic_policy.logs`, one entry per log action that ran.

function deepFreeze(v: unknown): unknown {
  if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

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
    // Values written as JSON are the same for every request: converted once, shared, frozen.
    const entries = Object.entries(config.metadata).map(([key, value]) =>
      typeof value === 'string'
        ? { key, template: ctx.template(value, `metadata.${key}`) }
        : { key, value: deepFreeze(fromCel(value)) },
    );
    return (x) => {
      const out: Record<string, unknown> = {};
      for (const e of entries) {
        out[e.key] = e.template === undefined ? e.value : e.template.render(x.values);
      }
      x.decisions.logs.push(out);
      return 'continue';
    };
  },
});
