import type { CompileContext } from '../action.ts';
import { appendValue, type HeaderMap } from '../exchange.ts';
import type { Template } from '../interpolate.ts';

// Header maps of action configs (`headers: {X-Name: "${…}"}`): names lower-cased as HTTP/2
// and the policy's variables have them, values templates.

export type CompiledHeaders = readonly (readonly [string, Template])[];

// A value with one of these written into the policy could never be sent: it is refused when the
// policy is saved. One that comes from a variable (the client's input) is refused as the head is
// sent: the edge answers 502.
const UNSENDABLE = /[\r\n\0]/;

export function compileHeaders(
  headers: Record<string, string>,
  ctx: CompileContext,
): CompiledHeaders {
  return Object.entries(headers).map(([name, value]) => {
    const field = `headers.${name}`;
    if (UNSENDABLE.test(value)) {
      ctx.fail(field, 'a header value cannot hold a CR, LF or NUL character');
    }
    return [name.toLowerCase(), ctx.template(value, field)] as const;
  });
}

export function renderHeaders(headers: CompiledHeaders, values: unknown): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, template] of headers) appendValue(out, name, template.render(values));
  return out;
}
