import { defineAction } from '../action.ts';
import { setResult } from '../exchange.ts';
import { WEBHOOK_PROVIDERS } from './webhook-providers.ts';

// verify-webhook: checks the request's signature with `provider`'s scheme
// (webhook-providers.ts) and `secret`; a request that fails gets 403 (unless `enforce: false`).
// The body is read whole before the upstream gets it (the edge keeps it and sends it on).
// webhook_verification.decision of the event says allow or block.

interface Config {
  provider: string;
  secret: string;
  enforce?: boolean;
}

export const VERIFY_WEBHOOK = defineAction<Config>({
  type: 'verify-webhook',
  phases: ['on_http_request'],
  configRequired: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['provider', 'secret'],
    properties: {
      provider: { type: 'string' },
      secret: { type: 'string', minLength: 1, maxLength: 1024 },
      enforce: { type: 'boolean' },
    },
  },
  compile(config, ctx) {
    const verify =
      WEBHOOK_PROVIDERS.get(config.provider) ??
      ctx.fail(
        'provider',
        `'${config.provider}' is not supported; the providers are ${[...WEBHOOK_PROVIDERS.keys()].join(', ')}`,
      );
    const secret = ctx.template(config.secret, 'secret');
    const enforce = config.enforce ?? true;
    return async (x) => {
      const body = (await x.readBody?.()) ?? undefined;
      const headers = x.request?.headers ?? {};
      const url = (x.values.req?.url as { _string?: string } | undefined)?._string ?? '';
      const form = /^application\/x-www-form-urlencoded/i.test(headers['content-type']?.[0] ?? '')
        ? [...new URLSearchParams(body?.toString('utf8') ?? '')]
        : undefined;
      const verified =
        body !== undefined &&
        verify({
          secret: secret.render(x.values),
          body,
          header: (name) => headers[name]?.[0] ?? '',
          url,
          form,
          nowMs: x.services.now(),
        });
      setResult(x, 'verify-webhook', {
        verified,
        ...(verified
          ? {}
          : {
              error: {
                code: 'ERR_WEBHOOK_VERIFICATION',
                message: 'The webhook signature is not valid.',
              },
            }),
      });
      x.decisions.webhookVerification = verified ? 'allow' : 'block';
      if (verified || !enforce) return 'continue';
      x.answer = {
        statusCode: 403,
        headers: { 'content-type': ['text/plain'] },
        body: 'The webhook signature is not valid.\n',
      };
      return 'stop';
    };
  },
});
