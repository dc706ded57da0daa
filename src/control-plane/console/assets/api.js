// The REST API as the console calls it: the API key from sessionStorage (this tab only, gone
// when it closes), JSON in and out, and Server-Sent Events read with fetch (EventSource cannot
// send the Authorization header, and a key in a URL would reach logs and history).

const KEY = 'agent-ingress-api-key';

export const session = {
  key: () => sessionStorage.getItem(KEY),
  signIn: (key) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),
};

/** An answer that is not 2xx: the service's error body (error_code, msg, details). */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.msg ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

function headers(key, extra = {}) {
  return { authorization: `Bearer ${key ?? session.key()}`, ...extra };
}

/** Calls the API; resolves with the JSON body, rejects with ApiError. */
export async function api(method, path, body, key) {
  const init = { method, headers: headers(key) };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  const parsed = text === '' ? null : JSON.parse(text);
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/**
 * Opens an event stream and calls `onEvent(name, data)` per event until it ends or `signal`
 * aborts. Resolves when it ends; rejects with ApiError when the answer is an error.
 */
export async function stream(method, path, { body, signal, accept, onEvent }) {
  const init = { method, signal, headers: headers(undefined, { accept: 'text/event-stream' }) };
  if (accept) init.headers.accept = accept;
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += value;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = block.split('\n');
      const name = lines.find((line) => line.startsWith('event: '))?.slice(7);
      const data = lines.find((line) => line.startsWith('data: '))?.slice(6);
      if (name !== undefined && data !== undefined) onEvent(name, JSON.parse(data));
    }
  }
}
