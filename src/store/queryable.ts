// What the service asks of its store, whichever engine and process serve it (db.ts opens one).

/** The rows a query returns, whichever engine ran it. */
export interface QueryResult<Row> {
  rows: Row[];
}

/** What repositories need of a database: a query, and a transaction holding queries. */
export interface Queryable {
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<Row>>;
}

/** The store's connection: PGlite embedded or a PostgreSQL pool behind one interface. */
export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** Bytes of WebAssembly memory the store holds in this process (PGlite's heap; 0 for PostgreSQL). */
  wasmMemoryBytes(): number;
}
