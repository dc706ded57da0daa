import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../../config/load.ts';
import { accountExists, createAccount } from '../../store/accounts.ts';
import { openStore } from '../../store/index.ts';
import { StoreInUseError } from '../../store/store-lock.ts';
import { mintApiKey } from '../api/api-keys/mint.ts';
import { runApi } from './api-command.ts';
import { type CliIo, processIo } from './io.ts';

const USAGE = `usage:
  npm run cli -- create-key --account <ac_id> [--description <text>]   mint another API key for an account
  npm run cli -- create-account [--description <text>]                create an account and its first API key
  npm run cli -- api <resource> <operation> [args] [--field value…]   call a running service's REST API
                                                                      (npm run cli -- api --help)
  npm run cli -- help                                                 this text (also --help, -h)

create-key and create-account use the same configuration as the service (DATA_DIR or
DATABASE_URL). With the embedded store, stop the service first: only one process at a time may
open it (the CLI refuses otherwise). api talks HTTP to AGENT_INGRESS_URL (default
http://127.0.0.1:8080) with the token in AGENT_INGRESS_API_KEY.`;

// sysexits.h: a usage error, bad input data, a temporary failure (the store is busy).
const EX_USAGE = 64;
const EX_DATAERR = 65;
const EX_TEMPFAIL = 75;

/** Administrative commands that run against the store directly (no API key needed). */
async function commands(argv: string[], io: CliIo): Promise<number> {
  if (argv[0] === 'api') return runApi(argv.slice(1), io);
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      account: { type: 'string' },
      description: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const command = positionals[0];
  if (values.help || command === 'help') {
    io.out(`${USAGE}\n`);
    return 0;
  }
  if (command !== 'create-key' && command !== 'create-account') {
    io.err(`${USAGE}\n`);
    return EX_USAGE;
  }
  const config = loadConfig(io.env);
  const db = await openStore(config);
  try {
    let accountId = values.account;
    if (command === 'create-account') {
      accountId = await createAccount(db);
    } else if (accountId === undefined || !(await accountExists(db, accountId))) {
      io.err(`create-key: --account must name an existing account\n`);
      return EX_DATAERR;
    }
    const key = await mintApiKey(
      db,
      { accountId, description: values.description ?? `created by the CLI (${command})` },
      null,
      config.publicUrl,
    );
    io.out(`account ${accountId}\napi key ${key.id}\ntoken   ${key.token}\n`);
    return 0;
  } finally {
    await db.close();
  }
}

/** Runs `npm run cli -- …argv` (argv after the script) and returns its exit status. */
export async function runCli(argv: string[], io: CliIo = processIo): Promise<number> {
  try {
    return await commands(argv, io);
  } catch (error) {
    const known = error instanceof ConfigError || error instanceof StoreInUseError;
    io.err(`${known ? error.message : String(error)}\n`);
    return error instanceof StoreInUseError ? EX_TEMPFAIL : 1;
  }
}
