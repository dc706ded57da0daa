import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { parseContentType as connectType } from '@connectrpc/connect/protocol-connect';
import { parseContentType as grpcType } from '@connectrpc/connect/protocol-grpc';
import { parseContentType as grpcWebType } from '@connectrpc/connect/protocol-grpc-web';
import type { FastifyRequest } from 'fastify';

// Which of the protocols connect-es speaks a request uses, so the ingest can read its bytes and
// answer in kind itself. A request this does not recognise (another content type or encoding,
// a GET) is left to connect-es, which answers with the protocol's own error.

/** How messages travel: one body (Connect unary) or length-prefixed envelopes (the others). */
export type Framing = 'connect' | 'connect-stream' | 'grpc' | 'grpc-web';

/** The decompressors of the encodings the ingest reads, by their name in the protocols' headers. */
export const DECOMPRESSORS: Record<string, () => Transform> = {
  gzip: createGunzip,
  br: createBrotliDecompress,
  deflate: createInflate,
};

/** How one ingest request is framed, encoded and compressed. */
export interface Wire {
  framing: Framing;
  /** Binary protobuf messages, or protobuf JSON. */
  binary: boolean;
  /** The body's compression (Connect unary) or that of envelopes flagged compressed. */
  encoding: string | undefined;
}

/** The wire of a Publish (`streaming` false) or PublishStream request, or undefined. */
export function wireOf(request: FastifyRequest, streaming: boolean): Wire | undefined {
  if (request.method !== 'POST') return undefined;
  const header = (name: string) => {
    const value = request.headers[name];
    return typeof value === 'string' ? value : null;
  };
  const contentType = header('content-type');
  const connect = connectType(contentType);
  if (connect !== undefined) {
    if (connect.stream !== streaming) return undefined;
    return connect.stream
      ? wire('connect-stream', connect.binary, header('connect-content-encoding'))
      : wire('connect', connect.binary, header('content-encoding'));
  }
  // The gRPC protocols compress messages, not the body.
  if ((header('content-encoding') ?? 'identity') !== 'identity') return undefined;
  const grpc = grpcType(contentType);
  if (grpc !== undefined) return wire('grpc', grpc.binary, header('grpc-encoding'));
  const grpcWeb = grpcWebType(contentType);
  if (grpcWeb !== undefined && !grpcWeb.text) {
    return wire('grpc-web', grpcWeb.binary, header('grpc-encoding'));
  }
  return undefined;
}

function wire(framing: Framing, binary: boolean, encoding: string | null): Wire | undefined {
  if (encoding === null || encoding === 'identity') {
    return { framing, binary, encoding: undefined };
  }
  return DECOMPRESSORS[encoding] === undefined ? undefined : { framing, binary, encoding };
}
