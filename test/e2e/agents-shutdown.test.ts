import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { STOP_REASONS } from '../../src/agent-plane/sessions/session-events.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import {
  curl,
  eventually,
  fileEvents,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from './agents-helpers.ts';

// The service as a process: SIGTERM ends every agent session with a stop event that is durable
// in its destination before the process exits, and the agent is told why.

const DOMAIN = 'agents-shutdown.example.com';
const PORTS_LINE = /Agents connect over SSH on port (\d+); the edge serves HTTP on port (\d+)/;

describe('agents at shutdown', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-agents-shutdown-'));
  let service: ServiceProcess | undefined;
  let agent: SshAgent | undefined;
  let echo: Awaited<ReturnType<typeof startEchoServer>> | undefined;

  afterAll(async () => {
    await agent?.kill();
    if (service?.running()) await service.stop('SIGKILL');
    echo?.server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('SIGTERM ends sessions with a durable stop event and tells the agent', async () => {
    service = await startServiceProcess({ dataDir });
    const { api } = service;
    const [, sshPort, edgePort] = await eventually(
      () => PORTS_LINE.exec(service!.stderr()) ?? undefined,
      'the ports line',
    );
    expect((await api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'sessions' } },
    });
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [{ type: 'agent_session_start.v0' }, { type: 'agent_session_stop.v0' }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
    const { token } = (await api('POST', '/credentials', {})).body;
    echo = await startEchoServer();
    const hostname = `app.${DOMAIN}`;
    agent = startSshAgent(
      { sshPort: Number(sshPort) },
      { user: token, hostname, localPort: echo.port },
    );
    await eventually(async () => {
      const list = (await api('GET', '/tunnel_sessions')).body.tunnel_sessions;
      return list.length === 1 ? list : undefined;
    }, 'the session');
    expect((await curl(Number(edgePort), hostname, '/up')).status).toBe(200);

    const exit = await service.stop('SIGTERM');
    expect(exit.code).toBe(0);
    expect(await agent.exited).not.toBe(0);
    expect(agent.output()).toContain(`session ended: ${STOP_REASONS.shutdown}`);
    const events = fileEvents(join(accountEventsDir(dataDir, service.accountId!), 'sessions'));
    expect(events.map((e) => [e.event_type, e.object.error])).toEqual([
      ['agent_session_start.v0', ''],
      ['agent_session_stop.v0', STOP_REASONS.shutdown],
    ]);
  });
});
