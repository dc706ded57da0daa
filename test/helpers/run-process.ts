import { spawn } from 'node:child_process';
import { SERVICE_DIR } from './service-process.ts';

/** How a command run to its end went: its exit code and everything it printed. */
export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command args` in the project directory with `env` added, and waits for it to end. */
export function runProcess(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<ProcessRun> {
  const child = spawn(command, args, {
    cwd: SERVICE_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}
