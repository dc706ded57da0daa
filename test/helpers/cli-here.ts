import { runCli } from '../../src/control-plane/cli/run.ts';
import type { ProcessRun } from './run-process.ts';

/**
 * Runs `npm run cli -- …args` in this process (the CLI's runCli with its output captured and
 * `env` added to this process's environment): what a process of it would print and exit with,
 * without starting node and loading its modules again for each command.
 */
export async function runCliHere(
  args: string[],
  env: Record<string, string> = {},
): Promise<ProcessRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    out: (text) => {
      stdout += text;
    },
    err: (text) => {
      stderr += text;
    },
    env: { ...process.env, ...env },
  });
  return { code, stdout, stderr };
}
