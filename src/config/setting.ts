import type { Kind } from './kinds.ts';

// The shape of a setting's declaration, and the units the declarations are written in.

/** The planes that read a setting (src/data-plane, src/control-plane, src/agent-plane). */
export type Plane = 'data' | 'control' | 'agent';

/** One setting: its variable, how it is read, which planes read it, and what it is for. */
export interface Setting<T> {
  env: string;
  planes: readonly Plane[];
  kind: Kind<T>;
  /** One sentence for people: the page and `--help` print it. */
  meaning: string;
}

export const EVERY: readonly Plane[] = ['data', 'control', 'agent'];
export const KiB = 1024;
export const MiB = 1024 * KiB;
export const GiB = 1024 * MiB;
export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
