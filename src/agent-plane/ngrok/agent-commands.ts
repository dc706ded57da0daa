import { AppError } from '../../shared/errors.ts';
import type { AgentCommand } from '../sessions/live-session.ts';
import { STREAM_TYPES } from './messages.ts';
import type { MuxSession } from './muxado/session.ts';
import { openTyped } from './muxado/typed.ts';
import { readJson } from './rpc.ts';

// The server's RPCs to an ngrok agent that the API sends (POST /tunnel_sessions/{id}/restart,
// /update): the service opens a typed stream, writes the request (Restart `{}`, Update
// `{Version, PermitMajorVersion}`), and the agent answers `{Error}`: absent or empty when its
// handler accepted it, its handler's error, or (ngrok's SDKs without a handler) the text below.

/**
 * What ngrok's SDKs answer a command they have no handler for (ngrok-rust's NOT_IMPLEMENTED, as
 * @ngrok/ngrok 1.7 and later versions word it); an agent that declared its own text at Auth is
 * matched on that.
 */
const NO_HANDLER = new Set([
  'the agent has not defined a callback for this operation',
  'the agent has no defined callback for this operation',
]);
/** How long the agent has to answer, ms: its handler runs before it does. */
export const COMMAND_TIMEOUT_MS = 10_000;
/** The most bytes of an answer (an error message). */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The stream type and request body of `command`. */
function requestOf(command: AgentCommand): { type: number; body: object } {
  if (command.name === 'restart') return { type: STREAM_TYPES.restart, body: {} };
  return {
    type: STREAM_TYPES.update,
    body: { Version: command.version, PermitMajorVersion: command.permitMajorVersion },
  };
}

/**
 * Sends `command` over `mux` and resolves when the agent accepted it; otherwise an AppError:
 * ERR_AGENT_COMMAND_UNSUPPORTED (no handler, or the agent declared at Auth it cannot, with its
 * words), ERR_AGENT_COMMAND_FAILED (its handler's error, no answer in time, the stream cut).
 */
export async function sendAgentCommand(
  mux: MuxSession,
  command: AgentCommand,
  declaredUnsupported: string | undefined,
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<void> {
  const { type, body } = requestOf(command);
  const stream = openTyped(mux, type);
  stream.on('error', () => {});
  stream.end(JSON.stringify(body));
  let answer: unknown;
  try {
    answer = await readJson(stream, { maxBytes: MAX_ANSWER_BYTES, timeoutMs });
  } catch (error) {
    throw new AppError(
      'ERR_AGENT_COMMAND_FAILED',
      `the agent did not answer the ${command.name} command: ${(error as Error).message}`,
      { command: command.name },
      { cause: error },
    );
  } finally {
    stream.destroy();
  }
  const said = (answer as { Error?: unknown } | null)?.Error;
  if (typeof said !== 'string' || said === '') return;
  const unsupported = NO_HANDLER.has(said) || said === declaredUnsupported;
  throw new AppError(
    unsupported ? 'ERR_AGENT_COMMAND_UNSUPPORTED' : 'ERR_AGENT_COMMAND_FAILED',
    unsupported
      ? `the agent does not support the ${command.name} command: "${said}"`
      : `the agent refused the ${command.name} command: "${said}"`,
    { command: command.name, agent_error: said },
  );
}
