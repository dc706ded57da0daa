import type { EventJson } from '../wire-json/to-json.ts';
import { type NameSet, REDACTED, type Redaction } from './policy.ts';
import { redactQuery, redactUrl } from './query.ts';

// The same redaction as the text writer's (wire-json.ts), on a decoded event: for the events
// written from the decoder's object, and for preview taps. A copy: the decoder's object stays
// as it was sent.

type Group = Record<string, unknown>;

// A copy only when a header is redacted; null-prototype, so a header named `__proto__` stays a
// key, as in the decoder's object.
function redactHeaders(headers: unknown, names: NameSet): unknown {
  if (headers === null || typeof headers !== 'object') return headers;
  const entries = Object.entries(headers);
  const hidden = ([name, values]: [string, unknown]) =>
    Array.isArray(values) && values.length > 0 && names.hasString(name);
  if (!entries.some(hidden)) return headers;
  const out: Record<string, unknown> = Object.create(null);
  for (const entry of entries) out[entry[0]] = hidden(entry) ? [REDACTED] : entry[1];
  return out;
}

function withHeaders(part: unknown, names: NameSet | null): unknown {
  if (names === null || part === null || typeof part !== 'object') return part;
  const group = part as Group;
  return { ...group, headers: redactHeaders(group.headers, names) };
}

function withUrl(request: unknown, names: NameSet | null): unknown {
  if (names === null || request === null || typeof request !== 'object') return request;
  const url = (request as Group).url as Group | undefined;
  if (url === undefined || url === null) return request;
  return {
    ...(request as Group),
    url: {
      ...url,
      ...(typeof url.query === 'string' ? { query: redactQuery(url.query, names) } : {}),
      ...(typeof url.raw === 'string' ? { raw: redactUrl(url.raw, names) } : {}),
    },
  };
}

/** An http_request_complete.v0 payload as `redaction` delivers it; other kinds as they are. */
export function redactObject(object: EventJson, redaction: Redaction): EventJson {
  const http = object.http as Group | undefined;
  if (http === undefined || http === null || typeof http !== 'object') return object;
  const { headers, queryParams } = redaction;
  if (headers === null && queryParams === null) return object;
  return {
    ...object,
    http: {
      ...http,
      request: withUrl(withHeaders(http.request, headers), queryParams),
      response: withHeaders(http.response, headers),
    },
  };
}
