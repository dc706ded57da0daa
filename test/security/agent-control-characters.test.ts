import ssh2 from 'ssh2';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, sessionEvents } from '../e2e/agents-helpers.ts';
import { useTestService } from '../helpers/service.ts';
import { STORES } from '../helpers/stores.ts';

// An agent's own words reach the store: its SSH version string (every session event and row) and
// the address it binds. A raw SSH client sends control characters in both; the service records
// them without those characters, refuses such a bind with its reason, and loses no event.

const DOMAIN = 'control-chars.test';

/** A raw SSH client with `ident` after `SSH-2.0-`; resolves once logged in. */
async function rawAgent(port: number, token: string, ident: string) {
  const client = new ssh2.Client();
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  client.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port, username: token, password: token, ident });
  });
  /** Asks for `-R <bindAddr>:80`: true when granted. */
  const bind = (bindAddr: string) =>
    new Promise<boolean>((resolve) => client.forwardIn(bindAddr, 80, (error) => resolve(!error)));
  return { client, closed, bind };
}

describe.each(STORES)('control characters from an agent ($kind)', ({ open }) => {
  const t = useTestService(open);
  let accountId: string;
  let token: string;

  beforeAll(async () => {
    accountId = (await t.api('GET', '/account')).body.id;
    expect((await t.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    token = (await t.api('POST', '/credentials', {})).body.token;
  });

  it('refuses a bind address with a NUL, and records the refusal without it', async () => {
    const agent = await rawAgent(t.service.sshPort!, token, 'Probe\u0000Agent');
    expect(await agent.bind(`app\u0000.${DOMAIN}`)).toBe(false);
    await agent.closed;
    const refused = await eventually(async () => {
      const events = await sessionEvents(t.service, accountId);
      return events.find((event) => event.object.error.includes('control characters'));
    }, 'the refusal event');
    expect(refused).toMatchObject({
      type: 'agent_session_start.v0',
      object: {
        metadata: `app.${DOMAIN}`,
        user_agent: 'SSH-2.0-ProbeAgent',
        error: 'the bind address has control characters',
      },
    });
  });

  it('records a session whose version string has control characters without them', async () => {
    const agent = await rawAgent(t.service.sshPort!, token, 'Probe\u0000\u0007\u001bAgent');
    const hostname = `ok.${DOMAIN}`;
    expect(await agent.bind(hostname)).toBe(true);
    const listed = await eventually(async () => {
      const list = (await t.api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.find((session: { metadata: string }) => session.metadata === hostname);
    }, 'the session');
    expect(listed.agent_version).toBe('SSH-2.0-ProbeAgent');
    agent.client.end();
    await agent.closed;
    const events = await eventually(async () => {
      const all = (await sessionEvents(t.service, accountId)).filter(
        (event) => event.object.metadata === hostname,
      );
      return all.length === 2 ? all : undefined;
    }, 'start and stop events');
    expect(events.map((event) => [event.type, event.object.user_agent])).toEqual([
      ['agent_session_start.v0', 'SSH-2.0-ProbeAgent'],
      ['agent_session_stop.v0', 'SSH-2.0-ProbeAgent'],
    ]);
  });
});
