import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { Db, Queryable, QueryResult } from './db.ts';
import {
  type CrossedError,
  rebuiltError,
  type StoreNews,
  type StoreReply,
  type StoreRequest,
} from './store-messages.ts';

// The embedded store runs in a process of its own (store-process-main.ts). PGlite is PostgreSQL
// compiled to WebAssembly: its memory (128 MiB) and V8's compiled code for it stay resident once
// touched, ~200 MiB of the service's RSS, on a path no event takes (the store holds
// configuration). Apart, the service process holds what serves traffic, and the store's
// process compiles PGlite with Liftoff only (no optimising tier: less code memory, and store
// queries are off the per-event path). See docs/decisions.md#store-process.

const MAIN = join(import.meta.dirname, 'store-process-main.ts');
const STORE_NODE_FLAGS = ['--liftoff-only'];

type Pending = { resolve(rows: unknown[]): void; reject(error: Error): void };
type Request = StoreRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;

/** Starts the store's process on the directory `dir` and waits until PGlite is open there. */
export async function openStoreProcess(dir: string): Promise<Db> {
  const child = fork(MAIN, [dir], {
    execArgv: STORE_NODE_FLAGS,
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let wasmMemoryBytes = 0;
  const opened = new Promise<void>((resolve, reject) => {
    child.once('exit', (code, signal) => reject(exitError(code, signal)));
    // Also the later 'memory' news: the size /metrics shows.
    child.on('message', (message: StoreReply | StoreNews) => {
      if (!('news' in message)) return;
      if (message.news === 'failed') reject(rebuiltError(message.error));
      else {
        wasmMemoryBytes = message.wasmMemoryBytes;
        resolve();
      }
    });
  });
  child.on('error', () => {}); // 'exit' follows and says it
  await opened;
  return storeClient(child, () => wasmMemoryBytes);
}

function exitError(code: number | null, signal: NodeJS.Signals | null): Error {
  return new Error(`the embedded store's process ended (${signal ?? `exit code ${code}`})`);
}

/** The Db the service uses, each call a request to the store's process. */
function storeClient(child: ChildProcess, wasmMemoryBytes: () => number): Db {
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let ended: Error | undefined;
  child.on('message', (message: StoreReply | StoreNews) => {
    if ('news' in message) return;
    const waiting = pending.get(message.id);
    pending.delete(message.id);
    if ('error' in message) waiting?.reject(rebuiltError(message.error as CrossedError));
    else waiting?.resolve(message.rows);
  });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      ended ??= exitError(code, signal);
      for (const waiting of pending.values()) waiting.reject(ended);
      pending.clear();
      resolve();
    }),
  );
  const call = (request: Request) =>
    new Promise<unknown[]>((resolve, reject) => {
      if (ended) return reject(ended);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ ...request, id } as StoreRequest);
    });
  const queryIn =
    (tx?: number): Queryable['query'] =>
    async <Row>(sql: string, params?: unknown[]) =>
      ({ rows: await call({ op: 'query', sql, params, tx }) }) as QueryResult<Row>;

  return {
    kind: 'pglite',
    query: queryIn(),
    wasmMemoryBytes,
    async transaction(work) {
      const tx = nextId; // the begin's id names the transaction (call takes it synchronously)
      await call({ op: 'begin' });
      let result: Awaited<ReturnType<typeof work>>;
      try {
        result = await work({ query: queryIn(tx) });
      } catch (error) {
        await call({ op: 'rollback', tx }).catch(() => {});
        throw error;
      }
      await call({ op: 'commit', tx });
      return result;
    },
    async close() {
      ended ??= new Error('the embedded store is closed');
      if (child.connected) child.disconnect();
      await exited;
    },
  };
}
