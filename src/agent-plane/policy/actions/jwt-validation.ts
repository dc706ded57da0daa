import { type CompileContext, defineAction, type Schema } from '../action.ts';
import { type Exchange, setResult } from '../exchange.ts';
import { signingKeys } from '../identity/json-documents.ts';
import { claimsProblem, decodeJwt, JWS_ALGORITHMS, signedBy } from '../identity/jwt.ts';
import type { Template } from '../interpolate.ts';

// jwt-validation: the request must carry every configured token (a header, or a field of a
// JSON or form body), each a JWS signed with an allowed algorithm by a key of the configured
// JWKS (`additional_jkus`, cached and refreshed: identity/json-documents.ts), from an allowed
// issuer, for an allowed audience, not expired (CLOCK_SKEW_MS of tolerance). Any other request
// gets 401 with a Bearer challenge (RFC 6750). Results in actions.ngrok.jwt_validation.tokens.

interface TokenSpec {
  type: string;
  method: 'header' | 'body';
  name: string;
  prefix?: string;
}

interface Config {
  issuer: { allow_list: { value: string }[] };
  audience?: { allow_list?: { value: string }[] };
  http: { tokens: TokenSpec[] };
  jws: {
    allowed_algorithms: string[];
    keys: {
      sources: { additional_jkus: string[] };
      identification?: { token_claims?: string[] }[];
    };
  };
}

/** Tolerated clock difference for exp and nbf (ngrok documents none; providers' clocks drift). */
export const CLOCK_SKEW_MS = 30_000;

const valueList = (minItems: number): Schema => ({
  type: 'object',
  additionalProperties: false,
  required: minItems > 0 ? ['allow_list'] : [],
  properties: {
    allow_list: {
      type: 'array',
      minItems: 1,
      maxItems: 32,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['value'],
        properties: { value: { type: 'string', minLength: 1, maxLength: 2048 } },
      },
    },
  },
});

const SCHEMA: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['issuer', 'http', 'jws'],
  properties: {
    issuer: valueList(1),
    audience: valueList(0),
    http: {
      type: 'object',
      additionalProperties: false,
      required: ['tokens'],
      properties: {
        tokens: {
          type: 'array',
          minItems: 1,
          maxItems: 8,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['type', 'method', 'name'],
            properties: {
              type: { enum: ['id_token', 'access_token', 'at+jwt', 'it+jwt', 'plain', 'jwt'] },
              method: { enum: ['header', 'body'] },
              name: { type: 'string', pattern: "^[!#$%&'*+\\-.^_`|~0-9A-Za-z]{1,256}$" },
              prefix: { type: 'string', maxLength: 64 },
            },
          },
        },
      },
    },
    jws: {
      type: 'object',
      additionalProperties: false,
      required: ['allowed_algorithms', 'keys'],
      properties: {
        allowed_algorithms: {
          type: 'array',
          minItems: 1,
          uniqueItems: true,
          items: { enum: [...JWS_ALGORITHMS] },
        },
        keys: {
          type: 'object',
          additionalProperties: false,
          required: ['sources'],
          properties: {
            sources: {
              type: 'object',
              additionalProperties: false,
              required: ['additional_jkus'],
              properties: {
                additional_jkus: {
                  type: 'array',
                  minItems: 1,
                  maxItems: 100,
                  uniqueItems: true,
                  items: { type: 'string', pattern: '^https?://[^\\s]+$', maxLength: 2048 },
                },
              },
            },
            identification: {
              type: 'array',
              items: {
                type: 'object',
                additionalProperties: false,
                properties: { token_claims: { type: 'array', items: { enum: ['kid'] } } },
              },
            },
          },
        },
      },
    },
  },
};

/** One token found in the request and what was found of it. */
interface TokenResult {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  signature: string;
  location: string;
  location_property: string;
  verified: boolean;
}

/** The field `name` of the request's JSON or form body. */
async function bodyField(x: Exchange, name: string): Promise<string | undefined> {
  if (!['POST', 'PUT', 'PATCH'].includes(x.request!.method)) return undefined;
  const body = (await x.readBody?.())?.toString('utf8');
  if (body === undefined) return undefined;
  const type = x.request!.headers['content-type']?.[0] ?? '';
  if (/^application\/x-www-form-urlencoded/i.test(type))
    return new URLSearchParams(body).get(name) ?? undefined;
  try {
    const value = (JSON.parse(body) as Record<string, unknown>)[name];
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The token `spec` names, its prefix removed, or undefined when absent. */
async function presented(x: Exchange, spec: TokenSpec): Promise<string | undefined> {
  const raw =
    spec.method === 'header'
      ? x.request!.headers[spec.name.toLowerCase()]?.[0]
      : await bodyField(x, spec.name);
  if (raw === undefined) return undefined;
  const prefix = spec.prefix ?? '';
  if (raw.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) return undefined;
  return raw.slice(prefix.length).trim();
}

/** What a token must satisfy, compiled from the config. */
interface Rules {
  issuers: Template[];
  audiences: string[];
  jkus: Template[];
  algorithms: string[];
}

function compileRules(config: Config, ctx: CompileContext): Rules {
  const unique = (values: string[], field: string) => {
    const twice = values.find((v, i) => values.indexOf(v) !== i);
    if (twice !== undefined) ctx.fail(field, `'${twice}' is listed twice`);
  };
  const audiences = (config.audience?.allow_list ?? []).map((a) => a.value);
  unique(
    config.issuer.allow_list.map((i) => i.value),
    'issuer.allow_list',
  );
  unique(audiences, 'audience.allow_list');
  unique(
    config.http.tokens.map((t) => `${t.method} ${t.name.toLowerCase()}`),
    'http.tokens',
  );
  return {
    issuers: config.issuer.allow_list.map((i, n) =>
      ctx.template(i.value, `issuer.allow_list[${n}].value`),
    ),
    audiences,
    jkus: config.jws.keys.sources.additional_jkus.map((u, n) =>
      ctx.template(u, `jws.keys.sources.additional_jkus[${n}]`),
    ),
    algorithms: config.jws.allowed_algorithms,
  };
}

/** The token checked against the rules: what was found of it, or why it is refused. */
async function verify(
  x: Exchange,
  token: string,
  spec: TokenSpec,
  rules: Rules,
): Promise<TokenResult | string> {
  const jwt = decodeJwt(token);
  if (jwt === undefined) return `the ${spec.name} token is not a JWT`;
  const alg = String(jwt.header.alg);
  if (!rules.algorithms.includes(alg)) {
    return `the ${spec.name} token is signed with ${alg}, which is not allowed`;
  }
  if (spec.type === 'at+jwt' && !/^(application\/)?at\+jwt$/i.test(String(jwt.header.typ))) {
    return `the ${spec.name} token is not of type at+jwt`;
  }
  const kid = typeof jwt.header.kid === 'string' ? jwt.header.kid : undefined;
  for (const jku of rules.jkus) {
    const keys = await signingKeys(x.services, jku.render(x.values), kid, alg).catch(() => []);
    if (!keys.some((k) => signedBy(jwt, k, alg))) continue;
    const problem = claimsProblem(jwt.payload, {
      issuers: rules.issuers.map((i) => i.render(x.values)),
      audiences: rules.audiences,
      nowMs: x.services.now(),
      skewMs: CLOCK_SKEW_MS,
    });
    if (problem !== undefined) return `the ${spec.name} token: ${problem}`;
    return { ...jwt, location: spec.method, location_property: spec.name, verified: true };
  }
  return `the ${spec.name} token signature is not valid`;
}

/** The 401 of a request without valid tokens (ngrok's ERR_NGROK_3401, RFC 6750's challenge). */
function refuse(x: Exchange, error: string): 'stop' {
  x.answer = {
    statusCode: 401,
    headers: {
      'www-authenticate': [
        `Bearer error="invalid_token", error_description="${error.replace(/["\\]/g, '')}"`,
      ],
      'content-type': ['text/plain; charset=utf-8'],
    },
    body: `Your request lacks valid credentials: ${error}.\n`,
  };
  return 'stop';
}

export const JWT_VALIDATION = defineAction<Config>({
  type: 'jwt-validation',
  phases: ['on_http_request'],
  configRequired: true,
  schema: SCHEMA,
  compile(config, ctx) {
    const rules = compileRules(config, ctx);
    return async (x) => {
      const tokens: TokenResult[] = [];
      let error: string | undefined;
      for (const spec of config.http.tokens) {
        const token = await presented(x, spec);
        const result =
          token === undefined
            ? `the ${spec.name} token is missing`
            : await verify(x, token, spec, rules);
        if (typeof result === 'string') {
          error = result;
          break;
        }
        tokens.push(result);
      }
      setResult(x, 'jwt-validation', {
        tokens,
        ...(error === undefined ? {} : { error: { code: 'ERR_NGROK_3401', message: error } }),
      });
      return error === undefined ? 'continue' : refuse(x, error);
    };
  },
});
