import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

/** A child Node process (the service or a baseline server) started like a user would. */
export interface Child {
  process: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts `node <script>` from the repository root and waits for `ready` on its stdout. */
export async function startNode(
  script: string,
  env: Record<string, string>,
  ready: RegExp,
): Promise<Child> {
  // BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the child (NODE_OPTIONS refuses it).
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, script], {
    cwd: ROOT,
    // Random agent and edge ports unless a bench asks for its own: benches may run side by side.
    env: {
      ...process.env,
      SSH_PORT: '0',
      AGENT_PORT: '0',
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    output += chunk;
    if (process.env.BENCH_DEBUG) process.stderr.write(chunk);
  });
  await new Promise<void>((resolve, reject) => {
    // A first start runs PGlite's initdb: on a busy shared machine that alone can take a minute.
    const timer = setTimeout(
      () => reject(new Error(`${script} did not start:\n${output}`)),
      120_000,
    );
    // The service prints its banner on stderr, the bench's helper servers on stdout.
    const check = () => {
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}:\n${output}`)));
  });
  return {
    process: child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
