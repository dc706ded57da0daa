import { describe, expect, it } from 'vitest';
import { BodyReader } from '../../src/agent-plane/edge/answer-body.ts';
import {
  framingOf,
  headEnd,
  headersOf,
  keepAliveMs,
  keepsAlive,
  parseHead,
} from '../../src/agent-plane/edge/answer-head.ts';
import { encodeHead, finishHead, frameChunk } from '../../src/agent-plane/edge/request-head.ts';

// The edge's own HTTP/1.1 framing (request-head.ts, answer-head.ts, answer-body.ts), byte by
// byte where the stream may cut: the e2e tests (edge-answer-framing.test.ts) send real answers
// through ssh -R, which decides by itself where its packets end.

const head = (text: string) => {
  const bytes = Buffer.from(text, 'latin1');
  return parseHead(bytes, headEnd(bytes));
};

/** Reads `wire` through a reader in pieces of `size` bytes; the body and the bytes after it. */
function readInPieces(text: string, framing: ReturnType<typeof framingOf>, size: number) {
  const wire = Buffer.from(text, 'latin1');
  const body: Buffer[] = [];
  const reader = new BodyReader(framing, (bytes) => body.push(Buffer.from(bytes)));
  let after = '';
  for (let at = 0; at < wire.length; at += size) {
    const piece = wire.subarray(at, at + size);
    const end = reader.read(piece, 0);
    if (reader.done) after += piece.toString('latin1', end);
  }
  return { body: Buffer.concat(body).toString('latin1'), done: reader.done, after };
}

describe("an agent's answer head", () => {
  it('keeps names as sent, in order, with repeats, values without surrounding spaces', () => {
    const parsed = head('HTTP/1.1 201 Made It\r\nX-A: 1 \r\nset-cookie: a\r\nSet-Cookie:b\r\n\r\n');
    expect(parsed).toEqual({
      minor: 1,
      statusCode: 201,
      statusMessage: 'Made It',
      rawHeaders: ['X-A', '1', 'set-cookie', 'a', 'Set-Cookie', 'b'],
    });
    expect(headersOf(parsed.rawHeaders)).toEqual({ 'x-a': '1', 'set-cookie': ['a', 'b'] });
  });

  it("joins repeats as Node's IncomingMessage does", () => {
    const raw = ['Vary', 'a', 'vary', 'b', 'Content-Type', 'x', 'content-type', 'y'];
    expect(headersOf(raw)).toEqual({ vary: 'a, b', 'content-type': 'x' });
  });

  it('refuses a status line or a field that is not HTTP/1.1', () => {
    expect(() => head('HTTP/2 200 OK\r\n\r\n')).toThrow(/status line/);
    expect(() => head('HTTP/1.1 20 OK\r\n\r\n')).toThrow(/status line/);
    expect(() => head('HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n')).toThrow(/header field/);
    expect(() => head('HTTP/1.1 200 OK\r\nx: a\x01b\r\n\r\n')).toThrow(/header field/);
    expect(() => head('HTTP/1.1 200 OK\r\n folded\r\n\r\n')).toThrow(/header field/);
  });

  it('frames the body by method, status, Transfer-Encoding, then Content-Length, never both', () => {
    const ok = (fields: string) => head(`HTTP/1.1 200 OK\r\n${fields}\r\n`);
    expect(framingOf(ok('content-length: 5\r\n'), 'HEAD')).toEqual({ kind: 'none' });
    expect(framingOf(head('HTTP/1.1 304 N\r\ncontent-length: 5\r\n\r\n'), 'GET').kind).toBe('none');
    expect(framingOf(head('HTTP/1.1 204 N\r\n\r\n'), 'GET').kind).toBe('none');
    const both = ok('content-length: 5\r\ntransfer-encoding: gzip, chunked\r\n');
    expect(() => framingOf(both, 'GET')).toThrow(/can't be present/);
    expect(framingOf(ok('transfer-encoding: gzip, chunked\r\n'), 'GET')).toEqual({
      kind: 'chunked',
    });
    expect(framingOf(ok('transfer-encoding: gzip\r\n'), 'GET')).toEqual({ kind: 'close' });
    expect(framingOf(ok(''), 'GET')).toEqual({ kind: 'close' });
    expect(framingOf(ok('content-length: 7, 7\r\n'), 'GET')).toEqual({ kind: 'length', bytes: 7 });
    expect(() => framingOf(ok('content-length: 7\r\ncontent-length: 8\r\n'), 'GET')).toThrow();
    expect(() => framingOf(ok('content-length: -1\r\n'), 'GET')).toThrow();
  });

  it('keeps the stream for HTTP/1.1 unless Connection: close, for HTTP/1.0 only on keep-alive', () => {
    expect(keepsAlive(head('HTTP/1.1 200 OK\r\n\r\n'))).toBe(true);
    expect(keepsAlive(head('HTTP/1.1 200 OK\r\nConnection: foo, Close\r\n\r\n'))).toBe(false);
    expect(keepsAlive(head('HTTP/1.0 200 OK\r\n\r\n'))).toBe(false);
    expect(keepsAlive(head('HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n\r\n'))).toBe(true);
    expect(keepAliveMs(head('HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=9\r\n\r\n'))).toBe(4000);
    expect(keepAliveMs(head('HTTP/1.1 200 OK\r\n\r\n'))).toBeUndefined();
  });
});

describe("an agent's answer body", () => {
  const chunked = '5;name="v"\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: t\r\n\r\nNEXT';

  it('reads a chunked body cut anywhere, and stops at its end', () => {
    for (const size of [1, 2, 3, 7, 100]) {
      expect(readInPieces(chunked, { kind: 'chunked' }, size), `pieces of ${size}`).toEqual({
        body: 'hello world',
        done: true,
        after: 'NEXT',
      });
    }
  });

  it('reads a Content-Length body cut anywhere, and stops at its end', () => {
    for (const size of [1, 4, 100]) {
      expect(readInPieces('0123456789NEXT', { kind: 'length', bytes: 10 }, size)).toEqual({
        body: '0123456789',
        done: true,
        after: 'NEXT',
      });
    }
  });

  it('is not done before the last chunk, nor a close-delimited body before the stream ends', () => {
    expect(readInPieces('5\r\nhello\r\n', { kind: 'chunked' }, 3).done).toBe(false);
    const close = readInPieces('all of it', { kind: 'close' }, 4);
    expect([close.body, close.done]).toEqual(['all of it', false]);
  });

  it('refuses a chunk size that is not hex, or data that overruns its size', () => {
    expect(() => readInPieces('zz\r\n', { kind: 'chunked' }, 100)).toThrow(/chunk size/);
    expect(() => readInPieces('2\r\nabc\r\n', { kind: 'chunked' }, 100)).toThrow(/chunk data/);
  });
});

describe('a request head for the agent', () => {
  const encode = (method: string, headers: Record<string, string | string[]>, body: boolean) => {
    const encoded = encodeHead({ method, target: '/p?q', headers });
    const { bytes, framing } = finishHead(encoded, body, true);
    return { text: bytes.toString('latin1'), framing };
  };

  it('writes every field, repeats on lines of their own, and asks to keep the stream', () => {
    const { text } = encode('GET', { host: 'h', 'x-b': ['1', '2'] }, false);
    expect(text).toBe(
      'GET /p?q HTTP/1.1\r\nhost: h\r\nx-b: 1\r\nx-b: 2\r\nConnection: keep-alive\r\n\r\n',
    );
  });

  it("frames a body as Node's http client did", () => {
    expect(encode('POST', { host: 'h' }, false).text).toContain('Content-Length: 0\r\n');
    expect(encode('GET', { host: 'h' }, false).text).not.toContain('Content-Length');
    const unframed = encode('POST', { host: 'h' }, true);
    expect(unframed.text).toContain('Transfer-Encoding: chunked\r\n');
    expect(unframed.framing).toEqual({ chunked: true, reusable: true });
    const sized = encode('PUT', { host: 'h', 'content-length': '3' }, true);
    expect(sized.framing.chunked).toBe(false);
    expect(Buffer.concat(frameChunk(Buffer.from('abc'), unframed.framing)).toString()).toBe(
      '3\r\nabc\r\n',
    );
  });

  it('refuses a field value or a target that would split the head', () => {
    expect(() => encode('GET', { 'x-a': 'a\r\nx-b: b' }, false)).toThrow(/Invalid character/);
    expect(() => encodeHead({ method: 'GET', target: '/a b', headers: {} })).toThrow(/unescaped/);
  });
});
