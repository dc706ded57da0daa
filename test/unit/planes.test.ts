import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// ARCHITECTURE.md's rules for src/, checked on the imports themselves (type-only ones too):
// the shared base imports no plane, the data plane no other plane, the agent plane nothing of
// the control plane; no file imports one that (directly or not) imports it back.
const ROOT = join(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');
const BASE = ['shared', 'store', 'catalogue', 'config', 'gen'];
const MAY_IMPORT: Record<string, string[]> = {
  base: ['base'],
  'data-plane': ['base', 'data-plane'],
  'agent-plane': ['base', 'data-plane', 'agent-plane'],
  'control-plane': ['base', 'data-plane', 'agent-plane', 'control-plane'],
  wiring: ['base', 'data-plane', 'agent-plane', 'control-plane', 'wiring'],
};
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) ? [path] : [];
  });
}

/** base, one of the planes, or wiring (main.ts, service.ts, app.ts, which join the planes). */
function planeOf(file: string): string {
  const top = relative(SRC, file).split('/')[0];
  if (BASE.includes(top)) return 'base';
  return top.endsWith('-plane') ? top : 'wiring';
}

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => resolve(dirname(file), m[1] ?? m[2]));
    graph.set(file, targets);
  }
  return graph;
}

/** Files on an import circle: Tarjan's strongly connected components larger than one file. */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node) as number);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) visit(next);
      if (onStack.has(next))
        low.set(
          node,
          Math.min(low.get(node) as number, low.get(next) ?? (index.get(next) as number)),
        );
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(relative(ROOT, member));
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('the three planes of src/', () => {
  const graph = importGraph();

  it('holds at most 12 entries at the top of src/', () => {
    expect(readdirSync(SRC).length).toBeLessThanOrEqual(12);
  });

  it('has no import that crosses a plane the wrong way', () => {
    const broken = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((target) => !MAY_IMPORT[planeOf(file)].includes(planeOf(target)))
        .map((target) => `${relative(ROOT, file)} -> ${relative(ROOT, target)}`),
    );
    expect(broken).toEqual([]);
  });

  it('has no files importing each other', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('sees the imports it checks (a rule that reads nothing cannot fail)', () => {
    const arrows = [...graph.values()].reduce((n, targets) => n + targets.length, 0);
    expect(arrows).toBeGreaterThan(500);
    expect(planeOf(join(SRC, 'data-plane', 'pipeline', 'pipeline.ts'))).toBe('data-plane');
    expect(planeOf(join(SRC, 'shared', 'ids.ts'))).toBe('base');
  });
});
