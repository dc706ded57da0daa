import type { BlockParts } from '../sinks/record-block.ts';
import type { SlabBlock } from './block-slabs.ts';
import type { Tally } from './match-tally.ts';
import type { RoutingConfig } from './routing.ts';
import type { TapCatch, TapSpec } from './tap-tee.ts';

// The typed boundary between the ingest thread and the route-events workers: one task per
// Publish request (never per event), one result per task.

/** What every worker is started with. */
export interface RouteWorkerData {
  /** Bound on the worker's block slabs (block-slabs.ts): MAX_INFLIGHT_BYTES. */
  slabBytes: number;
}

/** One Publish request for a worker: its protobuf bytes and the routing version to apply. */
export interface RouteTask {
  version: number;
  /** Present when the worker must (re)build its routing; workers ask for it with `need-config`. */
  config?: RoutingConfig;
  /** The PublishRequest, binary protobuf. */
  request: Uint8Array;
  /** Milliseconds since the epoch when the request arrived: the default event time. */
  receivedAt: number;
  /** A request with more events is refused before they are decoded (MAX_INGEST_EVENTS). */
  maxEvents: number;
  /** The taps open now (tap-tee.ts); absent when none is, which is the usual case. */
  taps?: readonly TapSpec[];
}

/**
 * The records one destination must make durable for the request to be acknowledged: a block in
 * one of the worker's slabs (block-slabs.ts), or, when none is free, a block's buffers
 * transferred from the worker (record-block.ts).
 */
export type Delivery = { destinationId: string } & ({ slab: SlabBlock } | { parts: BlockParts });

/** What a worker answers. */
export type RouteResult =
  | { kind: 'need-config' }
  /** `accounts`: the request's events per account, for their accounts' rejected count. */
  | { kind: 'invalid'; message: string; accounts: [string, number][] }
  | { kind: 'too-many'; message: string }
  /** A bug in routing (never the client's doing); `message` is for the log. */
  | { kind: 'failed'; message: string }
  | {
      kind: 'routed';
      /** The PublishResponse (accepted count, assigned ids in request order), binary protobuf. */
      response: Uint8Array;
      accepted: number;
      matched: number;
      deliveries: Delivery[];
      /** Bytes the deliveries' blocks hold (text and metadata): what the request keeps in memory. */
      bytes: number;
      /** Events per account and matches per subscription, for GET /pipeline/stats. */
      tally: Tally;
      /** What the open taps caught; present only when the task carried taps. */
      tapped?: TapCatch[];
      /** Slabs the worker made for this result's blocks: the ingest thread learns each once. */
      slabs?: [number, SharedArrayBuffer][];
    };
