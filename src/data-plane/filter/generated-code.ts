// What the filter's code generators (compile-js.ts and its parts, filter-environment.ts's views)
// may splice into source they hand to `new Function`: names checked to be plain identifiers,
// and literals written by JSON.stringify (a JS expression for any string or finite number,
// U+2028/U+2029 included since ES2019). Everything else reaches generated code as a value in a
// constants array, never as text.

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Whether `name` can be spliced as a variable, function or `.property` name. */
export function isIdentifier(name: string): boolean {
  return IDENTIFIER.test(name);
}

/** `name` itself, or a throw when it is not a plain identifier (a descriptor went wrong). */
export function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`generated code: '${name}' is not an identifier`);
  return name;
}

/** A string or finite number as a JS literal expression (parenthesized when negative). */
export function literal(value: string | number): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (!Number.isFinite(value)) throw new Error(`generated code: ${value} has no literal`);
  if (Object.is(value, -0)) return '(-0)';
  const text = JSON.stringify(value);
  return value < 0 ? `(${text})` : text;
}

/** Compiles generated source as a function of `params` and calls it with `args`. */
export function generate<T>(
  params: readonly string[],
  source: string,
  args: readonly unknown[],
): T {
  return new Function(...params.map(identifier), source)(...args) as T;
}
