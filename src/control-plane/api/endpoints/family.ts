import { compilePolicy, PolicyError } from '../../../agent-plane/policy/index.ts';
import { hostnameRefusal } from '../../../agent-plane/sessions/bind-policy.ts';
import { AppError } from '../../../shared/errors.ts';
import type { Family, FamilyContext } from '../objects/family.ts';
import { agentRefs, endpointStorage, isAgentEndpoint, readOnly } from './agent-endpoints.ts';
import { ENDPOINTS } from './resource.ts';

// A cloud endpoint: its URL on a hostname the account holds (one endpoint per hostname across
// the service), and its Traffic Policy, compiled here so a bad one is a 400 that says where.

/** The policy compiled, or the 400 naming its phase, rule, action and position. */
function checkPolicy(text: string): void {
  try {
    compilePolicy(text);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    throw new AppError('ERR_INVALID_FIELD', err.message, {
      field: 'traffic_policy',
      reason: err.code,
      location: err.location,
    });
  }
}

/** The URL's parts, or a 400: http(s), a hostname, no path, query, port or user. */
function readUrl(raw: string): { url: string; host: string; proto: 'http' | 'https' } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('ERR_INVALID_FIELD', `"url" ${JSON.stringify(raw)} is not a URL`, {
      field: 'url',
    });
  }
  const proto = url.protocol.slice(0, -1);
  if (
    (proto !== 'http' && proto !== 'https') ||
    url.port !== '' ||
    url.username !== '' ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== ''
  ) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"url" must be https://<hostname> or http://<hostname> (no port, path or query), got ${JSON.stringify(raw)}`,
      { field: 'url' },
    );
  }
  return { url: `${proto}://${url.hostname}`, host: url.hostname, proto };
}

async function checkHostname(host: string, ctx: FamilyContext): Promise<void> {
  const refusal = await hostnameRefusal(ctx.tx, ctx.config, ctx.accountId, host);
  if (refusal !== undefined) {
    throw new AppError('ERR_INVALID_DOMAIN', `"url": ${refusal}`, { field: 'url' });
  }
}

export const ENDPOINTS_FAMILY: Family = {
  resource: ENDPOINTS,
  storage: endpointStorage,
  async create(body, ctx) {
    if (body.type === 'agent') {
      throw new AppError(
        'ERR_INVALID_FIELD',
        '"type": agent endpoints are made by agents (an ngrok agent or SDK, ssh -R), not through the API; create a cloud endpoint',
        { field: 'type' },
      );
    }
    const { url, host, proto } = readUrl(body.url as string);
    await checkHostname(host, ctx);
    checkPolicy(body.traffic_policy as string);
    const now = new Date().toISOString();
    return {
      fields: {
        type: 'cloud',
        url,
        public_url: url,
        proto,
        hostport: `${host}:${proto === 'https' ? 443 : 80}`,
        traffic_policy: body.traffic_policy,
        bindings: ['public'],
        updated_at: now,
      },
      // One endpoint per hostname, whatever the scheme: the edge finds a policy by Host.
      unique: { key: host, scope: 'service', field: 'url' },
    };
  },
  update(current, body) {
    if (isAgentEndpoint(current)) throw readOnly(current, 'updated');
    if (typeof body.traffic_policy === 'string') checkPolicy(body.traffic_policy);
    return {
      fields: {
        ...(typeof body.traffic_policy === 'string' ? { traffic_policy: body.traffic_policy } : {}),
        updated_at: new Date().toISOString(),
      },
    };
  },
  beforeDelete(current) {
    if (isAgentEndpoint(current)) throw readOnly(current, 'deleted');
  },
  shown: (objects, { config }) => objects.map((object) => agentRefs(object, config.publicUrl)),
};
