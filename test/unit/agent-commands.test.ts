import { duplexPair } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { sendAgentCommand } from '../../src/agent-plane/ngrok/agent-commands.ts';
import { STREAM_TYPES } from '../../src/agent-plane/ngrok/messages.ts';
import { DEFAULT_LIMITS, MuxSession } from '../../src/agent-plane/ngrok/muxado/session.ts';
import { acceptTyped } from '../../src/agent-plane/ngrok/muxado/typed.ts';
import { answer, readJson } from '../../src/agent-plane/ngrok/rpc.ts';
import { AppError } from '../../src/shared/errors.ts';

// The server's commands over muxado, with a client session of the same module playing the
// agent: what it is sent, and how each answer an agent can give becomes the API's error. The
// real SDK's answers (a handler, none) are test/e2e/ngrok-api-control.test.ts's; a handler's
// error and silence are played here.

const sessions: MuxSession[] = [];
afterEach(() => {
  for (const session of sessions.splice(0)) session.close(0, 'done');
});

/** A server session and an agent that answers each command with `reply` (undefined: never). */
function agentAnswering(reply: object | undefined) {
  const [serverEnd, agentEnd] = duplexPair();
  const server = new MuxSession(serverEnd, DEFAULT_LIMITS, 'server');
  const agent = new MuxSession(agentEnd, DEFAULT_LIMITS, 'client');
  sessions.push(server, agent);
  const received: { type: number; body: unknown }[] = [];
  agent.on('stream', async (stream) => {
    // The server resets a command's stream once it has its answer (or gave up waiting).
    stream.on('error', () => {});
    const type = await acceptTyped(agent, stream, 1_000);
    received.push({ type, body: await readJson(stream, { maxBytes: 1024, timeoutMs: 1_000 }) });
    if (reply !== undefined) answer(stream, reply);
  });
  return { server, received };
}

/** The AppError `promise` rejects with. */
const failure = (promise: Promise<void>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as AppError,
  );

describe('server commands to an ngrok agent', () => {
  it('sends Restart and Update as ngrok does, and resolves on an answer without error', async () => {
    const { server, received } = agentAnswering({});
    await sendAgentCommand(server, { name: 'restart' }, undefined);
    const update = { name: 'update', version: '3.2.1', permitMajorVersion: true } as const;
    await sendAgentCommand(server, update, undefined);
    expect(received).toEqual([
      { type: STREAM_TYPES.restart, body: {} },
      { type: STREAM_TYPES.update, body: { Version: '3.2.1', PermitMajorVersion: true } },
    ]);
    // An empty Error is no error (Go agents send the field empty).
    await sendAgentCommand(agentAnswering({ Error: '' }).server, { name: 'restart' }, undefined);
  });

  it('is unsupported when the agent answers what it declared at Auth', async () => {
    const { server } = agentAnswering({ Error: 'restart is not supported on Windows' });
    const error = await failure(
      sendAgentCommand(server, { name: 'restart' }, 'restart is not supported on Windows'),
    );
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      code: 'ERR_AGENT_COMMAND_UNSUPPORTED',
      status: 409,
      details: { command: 'restart', agent_error: 'restart is not supported on Windows' },
    });
  });

  it("fails (502) with a handler's error, and when the agent stays silent", async () => {
    const refused = await failure(
      sendAgentCommand(agentAnswering({ Error: 'disk full' }).server, { name: 'restart' }, ''),
    );
    expect(refused).toMatchObject({
      code: 'ERR_AGENT_COMMAND_FAILED',
      status: 502,
      message: 'the agent refused the restart command: "disk full"',
    });
    const silent = await failure(
      sendAgentCommand(agentAnswering(undefined).server, { name: 'restart' }, undefined, 200),
    );
    expect(silent).toMatchObject({
      code: 'ERR_AGENT_COMMAND_FAILED',
      message: 'the agent did not answer the restart command: no complete message within 200 ms',
    });
  });
});
