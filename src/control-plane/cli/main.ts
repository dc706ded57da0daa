import { runCli } from './run.ts';

// `npm run cli`: the command line's entry point; the commands are in run.ts.

// Like the service: the store files this may create are for their own user (0600, dirs 0700).
process.umask(0o077);

process.exitCode = await runCli(process.argv.slice(2));
