// What the service and its embedded store's process (store-process.ts, store-process-main.ts)
// say to each other over the IPC channel (structured clone: Dates and byte arrays cross as such).

/** A query, or a step of a transaction; `tx` is the id of the `begin` that opened it. */
export type StoreRequest =
  | { id: number; op: 'query'; sql: string; params?: unknown[]; tx?: number }
  | { id: number; op: 'begin' | 'commit' | 'rollback'; tx?: number };

/** A database error as it crosses: its message and PostgreSQL's fields (code, constraint, …). */
export type CrossedError = { message: string } & Record<string, unknown>;

/** The answer to request `id`: its rows, or the error it failed with. */
export type StoreReply = { id: number; rows: unknown[] } | { id: number; error: CrossedError };

/** What the store's process says of itself: ready, failed to open, its WebAssembly memory. */
export type StoreNews =
  | { news: 'ready'; wasmMemoryBytes: number }
  | { news: 'failed'; error: CrossedError }
  | { news: 'memory'; wasmMemoryBytes: number };

/** An error's message, name and own fields, so the other side can rebuild it. */
export function crossError(error: unknown): CrossedError {
  if (!(error instanceof Error)) return { message: String(error) };
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || typeof value === 'object' || typeof value === 'function') continue;
    fields[key] = value;
  }
  return { ...fields, name: error.name, message: error.message };
}

/** The error `crossed` describes, with its fields (code, constraint, …) as they were. */
export function rebuiltError(crossed: CrossedError): Error {
  const { message, ...fields } = crossed;
  return Object.assign(new Error(message), fields);
}
