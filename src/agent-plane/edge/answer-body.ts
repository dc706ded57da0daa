import { AnswerParseError, type Framing } from './answer-head.ts';

// An agent's answer body, read off the stream as its framing says (RFC 9112 §6, §7.1): so many
// bytes (Content-Length), chunks up to the last one and its trailer section (chunked; the
// trailers are read and dropped, as the edge passed none on before), or everything up to the
// stream's end. What is delivered is the body alone, in slices of the stream's own chunks.

/** The longest chunk-size line or trailer line the edge reads. */
const MAX_LINE = 4096;

type ChunkState = 'size' | 'data' | 'data-end' | 'trailer';

export class BodyReader {
  readonly #framing: Framing;
  readonly #deliver: (bytes: Buffer) => void;
  /** Bytes still due: of the body (length), or of the current chunk (chunked). */
  #due: number;
  #state: ChunkState = 'size';
  /** A line (chunk size, CRLF, trailer) split across the stream's chunks. */
  #line = '';
  done: boolean;

  constructor(framing: Framing, deliver: (bytes: Buffer) => void) {
    this.#framing = framing;
    this.#deliver = deliver;
    this.#due = framing.kind === 'length' ? framing.bytes : 0;
    this.done = framing.kind === 'none' || (framing.kind === 'length' && framing.bytes === 0);
  }

  /** Whether the stream's end ends the body as it should (not an answer cut short). */
  get endsWithStream(): boolean {
    return this.#framing.kind === 'close';
  }

  /**
   * Reads the body from `chunk` at `offset`; the offset after the body when it ends within
   * `chunk`, else chunk.length.
   */
  read(chunk: Buffer, offset: number): number {
    if (this.done) return offset;
    switch (this.#framing.kind) {
      case 'close':
        this.#emit(chunk, offset, chunk.length);
        return chunk.length;
      case 'length':
        return this.#readLength(chunk, offset);
      default:
        return this.#readChunked(chunk, offset);
    }
  }

  #emit(chunk: Buffer, from: number, to: number): void {
    if (to > from)
      this.#deliver(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to));
  }

  #readLength(chunk: Buffer, offset: number): number {
    const end = Math.min(chunk.length, offset + this.#due);
    this.#emit(chunk, offset, end);
    this.#due -= end - offset;
    if (this.#due === 0) this.done = true;
    return end;
  }

  #readChunked(chunk: Buffer, offset: number): number {
    let at = offset;
    while (at < chunk.length && !this.done) {
      if (this.#state === 'data') {
        const end = Math.min(chunk.length, at + this.#due);
        this.#emit(chunk, at, end);
        this.#due -= end - at;
        at = end;
        if (this.#due === 0) this.#state = 'data-end';
        continue;
      }
      const line = this.#takeLine(chunk, at);
      if (line === undefined) return chunk.length;
      at = line.next;
      this.#onLine(line.text);
    }
    return at;
  }

  /** The line ending in `chunk` at or after `at` (with what came before it); undefined if none. */
  #takeLine(chunk: Buffer, at: number): { text: string; next: number } | undefined {
    const lf = chunk.indexOf(10, at);
    if (lf === -1) {
      this.#line += chunk.toString('latin1', at);
      if (this.#line.length > MAX_LINE) throw new AnswerParseError('Chunk line too long');
      return undefined;
    }
    let text = this.#line + chunk.toString('latin1', at, lf);
    this.#line = '';
    if (!text.endsWith('\r')) throw new AnswerParseError('Invalid chunk line ending');
    text = text.slice(0, -1);
    return { text, next: lf + 1 };
  }

  #onLine(text: string): void {
    if (this.#state === 'data-end') {
      if (text !== '') throw new AnswerParseError('Invalid chunk data ending');
      this.#state = 'size';
    } else if (this.#state === 'trailer') {
      if (text === '') this.done = true;
    } else {
      const size = /^([0-9A-Fa-f]{1,12})[ \t]*(?:;.*)?$/.exec(text);
      if (size === null) throw new AnswerParseError('Invalid chunk size');
      this.#due = Number.parseInt(size[1], 16);
      this.#state = this.#due === 0 ? 'trailer' : 'data';
    }
  }
}
