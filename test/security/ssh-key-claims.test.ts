import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { createAccount } from '../../src/store/accounts.ts';
import {
  curl,
  eventually,
  type SshAgent,
  startEchoServer,
  startSshAgent,
} from '../e2e/agents-helpers.ts';
import { expectError } from '../helpers/expect-error.ts';
import { type ApiClient, apiClient, useTestService } from '../helpers/service.ts';
import { keygen, sshDir } from '../helpers/ssh-keygen.ts';
import { STORES } from '../helpers/stores.ts';

// A public key is public: another account registering it at /ssh_credentials must not lock its
// owner's agents out (a key in two accounts logs in to neither). The second registration is
// refused without naming the account that holds the key, and the owner's agent goes on binding.

const DOMAIN = 'keys-a.test';

describe.each(STORES)('an SSH key held by one account ($kind)', ({ open, kind }) => {
  const t = useTestService(open);
  const dir = sshDir();
  let accountA: string;
  let b: ApiClient;
  let echo: Awaited<ReturnType<typeof startEchoServer>>;
  const agents: SshAgent[] = [];

  beforeAll(async () => {
    accountA = (await t.api('GET', '/account')).body.id;
    expect((await t.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    const accountB = await createAccount(t.service.db);
    const key = await mintApiKey(t.service.db, { accountId: accountB }, null, t.service.url);
    b = apiClient(t.service.url, key.token!);
    echo = await startEchoServer();
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    echo?.server.close();
    dir.remove();
  });

  it('refuses another account the key, and the owner’s agent still binds with it', async () => {
    const key = await keygen(dir.path, `owner-${kind}`, 'ed25519');
    expect((await t.api('POST', '/ssh_credentials', { public_key: key.pub })).status).toBe(201);
    const taken = await b('POST', '/ssh_credentials', { public_key: key.pub });
    expectError(taken, 409, 'ERR_ALREADY_EXISTS', 'registered in another account');
    expect(taken.body.msg).not.toContain(accountA);
    expect((await b('GET', '/ssh_credentials')).body.ssh_credentials).toEqual([]);

    const hostname = `app.${DOMAIN}`;
    const agent = startSshAgent(t.service, {
      user: 'agent',
      hostname,
      localPort: echo.port,
      identity: key.path,
    });
    agents.push(agent);
    await eventually(async () => {
      if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
      return (await curl(t.service.edgePort!, hostname, '/')).status === 200 ? true : undefined;
    }, 'the owner’s agent serving');
  });

  it('stores one of two registrations of one key made at once', async () => {
    const key = await keygen(dir.path, `race-${kind}`, 'ed25519');
    const answers = await Promise.all([
      t.api('POST', '/ssh_credentials', { public_key: key.pub }),
      b('POST', '/ssh_credentials', { public_key: key.pub }),
    ]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409]);
  });
});
