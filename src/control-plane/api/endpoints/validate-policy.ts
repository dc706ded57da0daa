import type { FastifyInstance } from 'fastify';
import {
  type CompiledPolicy,
  compilePolicy,
  type EndpointProtocol,
  PolicyError,
} from '../../../agent-plane/policy/index.ts';
import { AppError } from '../../../shared/errors.ts';
import type { ExtraRoute } from '../resource-types.ts';
import { checkShape, FIELD_CODES } from '../validate.ts';

// A Traffic Policy checked as an endpoint's create and update check it, and nothing saved:
// the console's policy editor asks on every pause in typing, so a document is known good (or
// where it is wrong) before anyone saves it.

const str = { type: 'string' } as const;

/** POST /endpoints/validate_policy, declared as an extra route of /endpoints. */
export const VALIDATE_POLICY: ExtraRoute = {
  name: 'validate_policy',
  method: 'POST',
  path: '/validate_policy',
  summary:
    'Compile a Traffic Policy without saving it: its phases and action types, or the 400 an endpoint would get (details.location)',
  status: 200,
  request: {
    type: 'object',
    properties: {
      traffic_policy: { ...str, maxLength: 65536 },
      url: {
        ...str,
        maxLength: 2048,
        description:
          "the endpoint's URL: its scheme decides the phases allowed (tcp:// only on_tcp_connect)",
      },
    },
    required: ['traffic_policy'],
    additionalProperties: false,
  },
  response: {
    type: 'object',
    properties: {
      phases: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            phase: str,
            rules: { type: 'integer' },
            actions: { type: 'array', items: str, description: 'action types, in order' },
          },
        },
      },
    },
  },
};

/** The policy compiled for `proto`, or the 400 naming its phase, rule, action and position. */
export function checkPolicy(text: string, proto: EndpointProtocol = 'https'): CompiledPolicy {
  try {
    return compilePolicy(text, proto);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    throw new AppError('ERR_INVALID_FIELD', err.message, {
      field: 'traffic_policy',
      reason: err.code,
      location: err.location,
    });
  }
}

/** Each phase the policy uses: how many rules, and their action types in order. */
function summary(policy: CompiledPolicy) {
  return Object.entries(policy.phases)
    .filter(([, rules]) => rules.length > 0)
    .map(([phase, rules]) => ({
      phase,
      rules: rules.length,
      actions: rules.flatMap((rule) => rule.actions.map((action) => action.type)),
    }));
}

/** The protocol a policy is checked for: the URL's scheme, https when none is given. */
function protocolOf(url: string | undefined): EndpointProtocol {
  const scheme = url?.split(':', 1)[0]?.toLowerCase();
  return scheme === 'tcp' || scheme === 'http' ? scheme : 'https';
}

/** Registers POST /endpoints/validate_policy (authenticated like every route; stores nothing). */
export function validatePolicyRoute(app: FastifyInstance): void {
  app.post('/endpoints/validate_policy', async (request) => {
    checkShape(request.body, VALIDATE_POLICY.request!, '', FIELD_CODES);
    const { traffic_policy, url } = request.body as { traffic_policy: string; url?: string };
    return { phases: summary(checkPolicy(traffic_policy, protocolOf(url))) };
  });
}
