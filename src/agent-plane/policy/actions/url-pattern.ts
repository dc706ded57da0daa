import { RE2JS } from 're2js';
import type { CompileContext } from '../action.ts';
import type { Template } from '../interpolate.ts';

// `from` and `to` of url-rewrite and redirect: `from` a regular expression (RE2, as ngrok's Go
// regexp) matched against the whole URL, `to` its replacement with $1-style references; both
// with `${…}` interpolated first. No `from` replaces the whole URL.

export interface UrlPattern {
  /** The new URL, or undefined when `from` does not match. */
  apply(url: string, values: unknown): string | undefined;
}

function compileRegex(text: string, ctx: CompileContext): RE2JS {
  try {
    return RE2JS.compile(text);
  } catch (err) {
    ctx.fail('from', `invalid regular expression: ${(err as Error).message}`);
  }
}

export function compileUrlPattern(
  config: { from?: string; to: string },
  ctx: CompileContext,
): UrlPattern {
  const to: Template = ctx.template(config.to, 'to');
  if (config.from === undefined) return { apply: (_url, values) => to.render(values) };
  const from = ctx.template(config.from, 'from');
  const fixed = from.constant === undefined ? undefined : compileRegex(from.constant, ctx);
  return {
    apply(url, values) {
      let re = fixed;
      if (re === undefined) {
        try {
          re = RE2JS.compile(from.render(values));
        } catch {
          return undefined;
        }
      }
      const m = re.matcher(url);
      if (!m.find()) return undefined;
      return re.matcher(url).replaceAll(to.render(values));
    },
  };
}
