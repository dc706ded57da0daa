import { type OpenPglite, openPgliteFiles, wasmMemoryBytes } from './pglite-files.ts';
import {
  crossError,
  type StoreNews,
  type StoreReply,
  type StoreRequest,
} from './store-messages.ts';

// The embedded store's own process (started by store-process.ts with the store directory as
// its argument): PGlite serving the service's queries and transactions over the IPC channel.
// It ends when the service closes it or goes away; signals sent to the whole process group
// (Ctrl-C) are the service's to handle, which then closes the store last.

type Transaction = Parameters<Parameters<OpenPglite['db']['transaction']>[0]>[0];

interface OpenTransaction {
  tx: Transaction;
  end(commit: boolean, requestId: number): void;
}

const MEMORY_REPORT_MS = 10_000;
const ROLLBACK = new Error('rolled back by the service');

const send = (message: StoreReply | StoreNews) => process.send?.(message);

function serve(store: OpenPglite): (request: StoreRequest) => void {
  const open = new Map<number, OpenTransaction>();
  const answer = (id: number, work: Promise<unknown[]>) =>
    work.then(
      (rows) => send({ id, rows }),
      (error: unknown) => send({ id, error: crossError(error) }),
    );

  const begin = (id: number) => {
    let replyTo = id;
    const ended = store.db.transaction(
      (tx) =>
        new Promise<void>((resolve, reject) => {
          open.set(id, {
            tx,
            end(commit, requestId) {
              replyTo = requestId;
              open.delete(id);
              if (commit) resolve();
              else reject(ROLLBACK);
            },
          });
          send({ id, rows: [] });
        }),
    );
    ended.then(
      () => send({ id: replyTo, rows: [] }),
      (error: unknown) =>
        send(
          error === ROLLBACK
            ? { id: replyTo, rows: [] }
            : { id: replyTo, error: crossError(error) },
        ),
    );
  };

  return (request) => {
    const tx = request.tx === undefined ? undefined : open.get(request.tx);
    if (request.tx !== undefined && tx === undefined) {
      send({ id: request.id, error: { message: `no open transaction ${request.tx}` } });
      return;
    }
    if (request.op === 'begin') begin(request.id);
    else if (request.op === 'query') {
      const queryable = tx?.tx ?? store.db;
      answer(
        request.id,
        queryable.query(request.sql, request.params).then((result) => result.rows),
      );
    } else tx?.end(request.op === 'commit', request.id);
  };
}

async function main(dir: string): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => {});
  let store: OpenPglite;
  try {
    store = await openPgliteFiles(dir);
  } catch (error) {
    send({ news: 'failed', error: crossError(error) });
    process.disconnect?.();
    return;
  }
  const memory = () => wasmMemoryBytes(store.db);
  const report = setInterval(
    () => send({ news: 'memory', wasmMemoryBytes: memory() }),
    MEMORY_REPORT_MS,
  );
  report.unref();
  process.on('message', serve(store));
  // The service closes the channel when it closes the store, and the channel closes when the
  // service is gone (a crash): either way PGlite closes and this process ends.
  process.once('disconnect', () => {
    clearInterval(report);
    store.close().finally(() => process.exit(0));
  });
  send({ news: 'ready', wasmMemoryBytes: memory() });
}

await main(process.argv[2]!);
