import type { CompileContext } from '../action.ts';
import { appendValue, type HeaderMap } from '../exchange.ts';
import type { Template } from '../interpolate.ts';

// Header maps of action configs (`headers: {X-Name: "${…}"}`): names lower-cased as HTTP/2
// and the policy's variables have them, values templates.

export type CompiledHeaders = readonly (readonly [string, Template])[];

export function compileHeaders(
  headers: Record<string, string>,
  ctx: CompileContext,
): CompiledHeaders {
  return Object.entries(headers).map(
    ([name, value]) => [name.toLowerCase(), ctx.template(value, `headers.${name}`)] as const,
  );
}

export function renderHeaders(headers: CompiledHeaders, values: unknown): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, template] of headers) appendValue(out, name, template.render(values));
  return out;
}
