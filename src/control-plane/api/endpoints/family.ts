import type { EndpointProtocol } from '../../../agent-plane/policy/index.ts';
import { hostnameRefusal } from '../../../agent-plane/sessions/bind-policy.ts';
import { AppError } from '../../../shared/errors.ts';
import type { Family, FamilyContext } from '../objects/family.ts';
import { agentRefs, endpointStorage, isAgentEndpoint, readOnly } from './agent-endpoints.ts';
import { redactPolicySecrets } from './redact-policy.ts';
import { ENDPOINTS } from './resource.ts';
import { checkPolicy, validatePolicyRoute } from './validate-policy.ts';

// A cloud endpoint: its URL on a hostname the account holds, or on one of its reserved TCP
// addresses (one endpoint per hostname or address across the service), and its Traffic Policy,
// compiled here for the URL's protocol so a bad one is a 400 that says where. The policy holds
// secrets (basic-auth passwords, client secrets): it is the object's sealed secret, opened to
// answer its owner and by the edge, and its audit events carry it redacted (redact-policy.ts).

interface EndpointUrl {
  url: string;
  /** The hostname, or a TCP endpoint's `host:port`: what the edge finds the endpoint by. */
  key: string;
  host: string;
  port: number;
  proto: EndpointProtocol;
}

function invalidUrl(raw: string): AppError {
  return new AppError(
    'ERR_INVALID_FIELD',
    `"url" must be https://<hostname>, http://<hostname> (no port, path or query) or tcp://<reserved address> (host:port), got ${JSON.stringify(raw)}`,
    { field: 'url' },
  );
}

/** The URL's parts, or a 400: http(s) with a hostname only, or tcp with a host and a port. */
function readUrl(raw: string): EndpointUrl {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('ERR_INVALID_FIELD', `"url" ${JSON.stringify(raw)} is not a URL`, {
      field: 'url',
    });
  }
  const proto = url.protocol.slice(0, -1);
  const bare =
    url.username === '' &&
    url.password === '' &&
    url.search === '' &&
    url.hash === '' &&
    (url.pathname === '/' || url.pathname === '');
  if (proto === 'tcp' && bare && url.port !== '' && url.hostname !== '') {
    const key = `${url.hostname}:${url.port}`;
    return { url: `tcp://${key}`, key, host: url.hostname, port: Number(url.port), proto };
  }
  if ((proto !== 'http' && proto !== 'https') || !bare || url.port !== '') throw invalidUrl(raw);
  const port = proto === 'https' ? 443 : 80;
  return { url: `${proto}://${url.hostname}`, key: url.hostname, host: url.hostname, port, proto };
}

/** A TCP endpoint's address must be one of the account's reserved addresses. */
async function checkReservedAddr(addr: string, ctx: FamilyContext): Promise<void> {
  const held = await ctx.tx.query(
    `SELECT 1 FROM account_objects
      WHERE account_id = $1 AND kind = 'reserved_addrs' AND fields->>'addr' = $2`,
    [ctx.accountId, addr],
  );
  if (held.rows.length === 0) {
    throw new AppError(
      'ERR_INVALID_DOMAIN',
      `"url": ${addr} is not a reserved address of this account: reserve one (POST /reserved_addrs)`,
      { field: 'url' },
    );
  }
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
    const { url, key, host, port, proto } = readUrl(body.url as string);
    if (proto === 'tcp') await checkReservedAddr(key, ctx);
    else await checkHostname(host, ctx);
    checkPolicy(body.traffic_policy as string, proto);
    const now = new Date().toISOString();
    return {
      fields: {
        type: 'cloud',
        url,
        public_url: url,
        proto,
        hostport: `${host}:${port}`,
        bindings: ['public'],
        updated_at: now,
      },
      secret: body.traffic_policy as string,
      // One endpoint per hostname whatever the scheme (the edge finds a policy by Host), and
      // one per TCP address.
      unique: { key, scope: 'service', field: 'url' },
    };
  },
  update(current, body) {
    if (isAgentEndpoint(current)) throw readOnly(current, 'updated');
    if (typeof body.traffic_policy === 'string') {
      checkPolicy(body.traffic_policy, current.fields.proto as EndpointProtocol);
    }
    return {
      fields: { updated_at: new Date().toISOString() },
      ...(typeof body.traffic_policy === 'string' ? { secret: body.traffic_policy } : {}),
    };
  },
  beforeDelete(current) {
    if (isAgentEndpoint(current)) throw readOnly(current, 'deleted');
  },
  shown: (objects, { config, openSecret }) =>
    objects.map((object) =>
      isAgentEndpoint(object)
        ? agentRefs(object, config.publicUrl)
        : { traffic_policy: openSecret(object) ?? null },
    ),
  audited: (object) =>
    typeof object.traffic_policy === 'string'
      ? { ...object, traffic_policy: redactPolicySecrets(object.traffic_policy) }
      : object,
  routes: validatePolicyRoute,
};
