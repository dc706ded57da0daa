import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compilePolicy, type EndpointProtocol } from '../../src/agent-plane/policy/index.ts';

// ngrok's own Traffic Policy examples, quoted from its documentation (test/fixtures/
// ngrok-policy-examples/): each is accepted unchanged, or refused with the error its `# expect:`
// line names (an unsupported action, variable or macro, or a mistake in the example itself).
// docs/traffic-policy.md lists the refusals.

const DIR = join(import.meta.dirname, '../fixtures/ngrok-policy-examples');

interface Example {
  name: string;
  text: string;
  protocol: EndpointProtocol;
  expected: 'accepted' | { refused: string };
}

function headerOf(text: string, key: string): string | undefined {
  return new RegExp(`^# ${key}: (.*)$`, 'm').exec(text)?.[1];
}

function examples(): Example[] {
  const out: Example[] = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith('.yaml'))) {
    const documents = readFileSync(join(DIR, file), 'utf8').split(/^---$/m).slice(1);
    documents.forEach((text, i) => {
      const source = headerOf(text, 'source');
      const expect = headerOf(text, 'expect');
      if (source === undefined || expect === undefined) {
        throw new Error(`${file} document ${i + 1} has no '# source:' or '# expect:' line`);
      }
      out.push({
        name: `${file} #${i + 1} ${source.replace('ngrok/ngrok-docs ', '')}`,
        text,
        protocol: (headerOf(text, 'endpoint') ?? 'https') as EndpointProtocol,
        expected:
          expect === 'accepted' ? 'accepted' : { refused: expect.replace(/^refused: /, '') },
      });
    });
  }
  return out;
}

const ALL = examples();

describe("ngrok's documented Traffic Policy examples", () => {
  it('are all here: 164 examples from the actions, examples, gallery and concept pages', () => {
    expect(ALL).toHaveLength(164);
    expect(ALL.filter((e) => e.expected === 'accepted')).toHaveLength(100);
  });

  it.each(ALL.filter((e) => e.expected === 'accepted'))('accepts $name', ({ text, protocol }) => {
    expect(compilePolicy(text, protocol).text).toBe(text);
  });

  it.each(ALL.filter((e) => e.expected !== 'accepted'))('refuses $name', (example) => {
    const { refused } = example.expected as { refused: string };
    expect(() => compilePolicy(example.text, example.protocol)).toThrow(refused);
  });
});
