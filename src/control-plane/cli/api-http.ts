// The HTTP side of `cli api`: one request to a running service, `--all` paging, and printing the
// answer (JSON, or a compact table for people: table.ts) or the error body (to stderr).

import { table } from './table.ts';

/** Exit status of an answer the API refused (4xx/5xx); usage errors exit 64 (cli.ts). */
export const EXIT_API_ERROR = 1;
/** sysexits.h EX_UNAVAILABLE: the service could not be reached. */
export const EXIT_UNREACHABLE = 69;
/** sysexits.h EX_CONFIG: AGENT_INGRESS_API_KEY is not set. */
export const EXIT_CONFIG = 78;

/** Where the service is and the key to call it with (AGENT_INGRESS_URL, AGENT_INGRESS_API_KEY). */
export interface Target {
  baseUrl: string;
  apiKey: string;
}

/** One request: method, path (with query) and an optional JSON body. */
export interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  body?: unknown;
  /** Follow `next_page_uri`, gathering every page's `listKey` array into one answer. */
  allPages?: string;
}

/** A failure that ends the command with `exitCode` after printing `message` to stderr. */
export class CliFailure extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** The service and key from the environment; a missing key is a configuration error. */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): Target {
  const apiKey = env.AGENT_INGRESS_API_KEY;
  if (!apiKey) {
    throw new CliFailure('AGENT_INGRESS_API_KEY must be set to an API key token', EXIT_CONFIG);
  }
  return { baseUrl: env.AGENT_INGRESS_URL || 'http://127.0.0.1:8080', apiKey };
}

/** Sends one request; an error answer becomes a CliFailure naming its code and operation id. */
async function send(
  target: Target,
  method: string,
  url: URL,
  out: (text: string) => void,
  body?: unknown,
): Promise<unknown> {
  const headers: Record<string, string> = { authorization: `Bearer ${target.apiKey}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message ?? String(error);
    throw new CliFailure(`cannot reach ${url.origin}: ${cause}`, EXIT_UNREACHABLE);
  }
  if (response.ok && response.headers.get('content-type')?.startsWith('text/event-stream')) {
    await printEvents(response.body!, out);
    return undefined;
  }
  const text = await response.text();
  if (response.ok) return text === '' ? undefined : JSON.parse(text);
  throw new CliFailure(describeError(response, text), EXIT_API_ERROR);
}

/**
 * Prints a stream of Server-Sent Events (a tap) as it arrives, one JSON line per event:
 * `{"event": name, ...data}`, so `| jq` reads it; returns when the service ends it.
 */
async function printEvents(
  body: ReadableStream<Uint8Array>,
  out: (text: string) => void,
): Promise<void> {
  let buffer = '';
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const lines = buffer.slice(0, end).split('\n');
      buffer = buffer.slice(end + 2);
      const event = lines.find((line) => line.startsWith('event: '))?.slice(7);
      const data = lines.find((line) => line.startsWith('data: '))?.slice(6);
      if (event === undefined || data === undefined) continue;
      out(`${JSON.stringify({ event, ...JSON.parse(data) })}\n`);
    }
  }
}

/** `ERR_CODE (status): msg`, the other details, and the operation id (body or header). */
function describeError(response: Response, text: string): string {
  let parsed: { error_code?: string; msg?: string; details?: Record<string, unknown> } = {};
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { msg: text };
  }
  const { operation_id: bodyOpId, ...details } = parsed.details ?? {};
  const operationId = bodyOpId ?? response.headers.get('ngrok-operation-id') ?? 'unknown';
  const lines = [`${parsed.error_code ?? 'ERROR'} (${response.status}): ${parsed.msg ?? ''}`];
  if (Object.keys(details).length > 0) lines.push(`details: ${JSON.stringify(details)}`);
  lines.push(`operation id: ${operationId}`);
  return lines.join('\n');
}

/** Performs `call`; with allPages, every page's items under one list key. `out` prints a stream. */
export async function perform(
  target: Target,
  call: Call,
  out: (text: string) => void,
): Promise<unknown> {
  const base = new URL(target.baseUrl);
  const first = await send(target, call.method, new URL(call.path, base), out, call.body);
  if (call.allPages === undefined) return first;
  const key = call.allPages;
  const answer = first as Record<string, unknown>;
  const items = [...(answer[key] as unknown[])];
  let next = answer.next_page_uri as string | null;
  while (next) {
    // Asked of the service we talk to, whatever public URL it names itself by.
    const { pathname, search } = new URL(next);
    const page = (await send(target, 'GET', new URL(pathname + search, base), out)) as Record<
      string,
      unknown
    >;
    items.push(...(page[key] as unknown[]));
    next = page.next_page_uri as string | null;
  }
  return { ...answer, [key]: items, next_page_uri: null };
}

/** The answer as the user asked: pretty JSON (nothing for a 204) or a table. */
export function render(answer: unknown, output: 'json' | 'table'): string {
  if (answer === undefined) return '';
  return output === 'table' ? `${table(answer)}\n` : `${JSON.stringify(answer, null, 2)}\n`;
}
