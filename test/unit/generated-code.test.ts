import { describe, expect, it } from 'vitest';
import {
  generate,
  identifier,
  isIdentifier,
  literal,
} from '../../src/data-plane/filter/generated-code.ts';

// The one place src/data-plane/filter/'s code generators turn names and literals into source text.

describe('generated-code', () => {
  it('passes plain identifiers and refuses anything that could end the name', () => {
    expect(identifier('server_port')).toBe('server_port');
    expect(isIdentifier('Conn')).toBe(true);
    for (const bad of ['', '1a', 'a-b', 'a;b', 'a b', 'a.b', 'a\u2028', '(x)']) {
      expect(isIdentifier(bad), bad).toBe(false);
      expect(() => identifier(bad), bad).toThrow(/not an identifier/);
    }
  });

  it('writes literals that evaluate back to the same value, and refuses non-finite numbers', () => {
    const strings = ['', '"); throw 1; ("', '\u2028\u2029', '\\', '😀', '\ud800', '</script>'];
    for (const value of [...strings, 0, -0, -1.5, 443, 2 ** 53, 1e-7]) {
      const back = generate<() => unknown>([], `return () => ${literal(value)};`, [])();
      expect(Object.is(back, value), String(value)).toBe(true);
    }
    expect(literal(-3)).toBe('(-3)');
    expect(() => literal(Number.NaN)).toThrow();
    expect(() => literal(Number.POSITIVE_INFINITY)).toThrow();
  });

  it('refuses a parameter name that is not an identifier', () => {
    expect(() => generate(['a, b'], 'return 1;', [])).toThrow(/not an identifier/);
  });
});
