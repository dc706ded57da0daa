// What a CLI run writes to and reads: the process's stdout, stderr and environment (main.ts), or
// a caller's (the tests run most commands in their own process this way).

/** Where a run prints, and the environment it reads its settings from. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

/** The process's own streams and environment. */
export const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  env: process.env,
};
