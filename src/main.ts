import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { startService } from './service.ts';
import { StoreInUseError } from './store/store-lock.ts';

// Everything the service creates (store files, spools, event files, the secrets key) is for its
// own user: files 0600, directories 0700, whatever umask the shell had.
process.umask(0o077);

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(78);
}

const logger = createLogger(config.logLevel);
const service = await startService(config, logger).catch((error: unknown) => {
  if (!(error instanceof StoreInUseError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(75); // EX_TEMPFAIL: start again once the other process has stopped
});
logger.info({ url: service.url, store: service.db.kind }, 'listening');
process.stdout.write(`Agent Ingress listening on ${service.url} (store: ${service.db.kind})\n`);
if (service.firstKey !== undefined) {
  const { firstKey } = service;
  process.stdout.write(
    config.bootstrapApiKey === undefined
      ? `Created account ${firstKey.accountId} and its first API key ${firstKey.id}.\n` +
          `Its token is shown only this once; keep it:\n\n  ${firstKey.token}\n\n`
      : `Created account ${firstKey.accountId} with BOOTSTRAP_API_KEY as API key ${firstKey.id}.\n`,
  );
}

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}
