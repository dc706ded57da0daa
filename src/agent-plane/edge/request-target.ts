import type { IncomingMessage } from 'node:http';

// Which host a request is for, read as RFC 9112 says. A request with two Host fields is
// refused (§3.2: 400); an absolute-form target (`GET http://host/path`, §3.2.2) names the host
// itself and its Host field is ignored: the request is routed by the target's authority and
// the agent receives origin-form with that Host, as nginx does (docs/decisions.md#absolute-form).

/** An authority the edge can route by: a name or an IP literal, and maybe a port; no user info. */
const AUTHORITY = /^(?:[a-z0-9._~-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)([^#]*)$/i;

/**
 * Why the request cannot be routed (its 400's text), or undefined; an absolute-form target is
 * rewritten in place to origin-form, its authority becoming the Host field.
 */
export function targetRefusal(request: IncomingMessage): string | undefined {
  let hosts = 0;
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i].toLowerCase() === 'host') hosts += 1;
  }
  if (hosts > 1) return 'The request has more than one Host field.';
  const target = request.url ?? '';
  if (target.startsWith('/') || target === '*') return undefined;
  const absolute = ABSOLUTE_FORM.exec(target);
  if (absolute === null || !AUTHORITY.test(absolute[1])) {
    return 'The request target is neither a path nor an http(s) URL with a host.';
  }
  const [, authority, rest] = absolute;
  request.url = rest.startsWith('/') ? rest : `/${rest}`;
  request.headers.host = authority;
  return undefined;
}
