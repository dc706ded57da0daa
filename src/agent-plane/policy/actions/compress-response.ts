import { defineAction } from '../action.ts';

// compress-response: asks the edge to compress the answer with the first of `algorithms` the
// client accepts (Accept-Encoding), unless it is already encoded. Only gzip and deflate: they
// are what compression.algorithm of the traffic event can say (SPEC.md); ngrok's br and
// compress are refused rather than ignored.

export const SUPPORTED_COMPRESSION = ['gzip', 'deflate'] as const;

export const COMPRESS_RESPONSE = defineAction<{ algorithms?: string[] }>({
  type: 'compress-response',
  phases: ['on_http_response'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      algorithms: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string' } },
    },
  },
  compile(config, ctx) {
    const algorithms = config.algorithms ?? [...SUPPORTED_COMPRESSION];
    algorithms.forEach((a, i) => {
      if (!(SUPPORTED_COMPRESSION as readonly string[]).includes(a)) {
        ctx.fail(
          `algorithms[${i}]`,
          `'${a}' is not supported; this service compresses with ${SUPPORTED_COMPRESSION.join(' and ')} only`,
        );
      }
    });
    return (x) => {
      x.compress = algorithms;
      return 'continue';
    };
  },
});
