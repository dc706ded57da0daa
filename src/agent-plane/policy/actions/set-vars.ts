import { defineAction } from '../action.ts';
import type { Template } from '../interpolate.ts';
import { toCel } from '../macros.ts';

// set-vars: sets `vars.<name>` for the rules after it; string values with `${…}`, others as
// written (YAML/JSON values).

type Entry = { name: string; template?: Template; value?: unknown };

export const SET_VARS = defineAction<{ vars: Record<string, unknown>[] }>({
  type: 'set-vars',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['vars'],
    properties: {
      vars: {
        type: 'array',
        minItems: 1,
        maxItems: 64,
        items: {
          type: 'object',
          minProperties: 1,
          maxProperties: 1,
          propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
        },
      },
    },
  },
  compile(config, ctx) {
    const entries: Entry[] = config.vars.map((v, i) => {
      const [name, value] = Object.entries(v)[0];
      return typeof value === 'string'
        ? { name, template: ctx.template(value, `vars[${i}].${name}`) }
        : { name, value: toCel(value) };
    });
    return (x) => {
      for (const e of entries) {
        x.values.vars[e.name] = e.template ? e.template.render(x.values) : e.value;
      }
      return 'continue';
    };
  },
});
