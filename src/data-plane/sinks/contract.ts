import { type Batch, type Sink, SinkError } from './types.ts';

/**
 * The rules every sink keeps, enforced here once instead of by each: `close()` waits for the
 * writes already started, then closes the client; a `write()` after `close()` writes nothing and
 * fails with a permanent SinkError (the destination is shutting down; a retry cannot help);
 * closing twice is closing once.
 */
export function withSinkContract(kind: string, sink: Sink): Sink {
  const writing = new Set<Promise<void>>();
  let closed: Promise<void> | undefined;
  return {
    write(batch: Batch) {
      if (closed !== undefined) {
        return Promise.reject(new SinkError(`${kind} sink is closed`, false));
      }
      const write = sink.write(batch);
      writing.add(write);
      const done = () => writing.delete(write);
      write.then(done, done);
      return write;
    },
    close() {
      closed ??= Promise.allSettled(writing).then(() => sink.close());
      return closed;
    },
  };
}
