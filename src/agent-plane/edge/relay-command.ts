import { request as httpRequest, type ServerResponse } from 'node:http';
import { AppError, ERROR_CODES, type ErrorCode } from '../../shared/errors.ts';
import type { AgentCommand } from '../sessions/live-session.ts';
import { commandOf, type SessionRegistry } from '../sessions/registry.ts';
import { RELAY_HEADER, type RelayAuth } from './relay-auth.ts';
import { type Owner, target } from './relay-client.ts';

// A command for an agent (POST /tunnel_sessions/{id}/restart, /update) whose session another
// instance holds travels as a stop does: a signed POST to the owner's INTERNAL_URL, which sends
// it to the agent and answers 204, 404 (no such session), or the AppError the agent's answer
// made, as JSON, so the API answers the same wherever the agent is connected.

/** Facts a relayed command carries. */
export interface RelayedCommand {
  kind: 'command';
  session: string;
  accountId: string;
  command: AgentCommand;
}

/** The path the owner's relay listener takes commands on. */
export const COMMAND_PATH = '/relay/command';

/** The owner's side: sends the command to its session's agent and answers how it went. */
export function serveRelayedCommand(
  registry: SessionRegistry,
  facts: RelayedCommand,
  response: ServerResponse,
): void {
  const live = registry.get(facts.accountId, facts.session);
  if (live === undefined) return void response.writeHead(404).end();
  commandOf(live)(facts.command).then(
    () => response.writeHead(204).end(),
    (error: unknown) => {
      const failure = AppError.from(error);
      response.writeHead(failure.status, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ code: failure.code, message: failure.message, details: failure.details }),
      );
    },
  );
}

/** The relaying side: asks `owner` to send `command` to its session `id`'s agent. */
export async function relayCommand(
  auth: RelayAuth,
  owner: Owner,
  id: string,
  accountId: string,
  command: AgentCommand,
): Promise<boolean> {
  const facts: RelayedCommand = { kind: 'command', session: id, accountId, command };
  const { status, body } = await new Promise<{ status: number; body: string }>(
    (resolve, reject) => {
      const upstream = httpRequest({
        ...target(owner.url, COMMAND_PATH),
        method: 'POST',
        headers: { [RELAY_HEADER]: auth.sign(owner.id, facts) },
      });
      upstream.on('response', (answer) => {
        let text = '';
        answer.setEncoding('utf8');
        answer.on('data', (chunk: string) => {
          text += chunk;
        });
        answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body: text }));
        answer.on('error', reject);
      });
      upstream.on('error', reject);
      upstream.end();
    },
  ).catch((error: unknown) => {
    throw new AppError(
      'ERR_UNAVAILABLE',
      `the instance serving session ${id} cannot be reached`,
      { id },
      { cause: error },
    );
  });
  if (status === 204) return true;
  if (status === 404) return false;
  throw ownersError(id, status, body);
}

/** The AppError the owner answered, or ERR_UNAVAILABLE for an answer that is none. */
function ownersError(id: string, status: number, body: string): AppError {
  try {
    const { code, message, details } = JSON.parse(body) as {
      code: ErrorCode;
      message: string;
      details: Record<string, unknown>;
    };
    if (Object.hasOwn(ERROR_CODES, code) && typeof message === 'string') {
      return new AppError(code, message, details ?? {});
    }
  } catch {
    // Not the owner's JSON: said below.
  }
  return new AppError('ERR_UNAVAILABLE', `the instance serving session ${id} answered ${status}`, {
    id,
  });
}
