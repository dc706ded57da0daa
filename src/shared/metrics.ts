import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

// Prometheus metrics, named <area>_<thing>_<unit>; updated per request and per batch, never per
// event. Labels stay bounded: sink kind and status, never a destination or account id.

/** What the metrics read from the rest of the service when scraped. */
export interface MetricSources {
  /** The embedded store's WebAssembly memory (Db.wasmMemoryBytes). */
  storeWasmMemoryBytes?: () => number;
  /** The kinds of sink, each shown from the start at zero (the data plane's SINKS). */
  sinkKinds?: readonly string[];
}

/** The service's metrics and the registry /metrics renders. */
export function createMetrics(sources: MetricSources = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'agent_ingress_' });
  const registers = [registry];
  const metrics = {
    registry,
    ingestRequests: new Counter({
      name: 'agent_ingress_ingest_requests_total',
      help: 'Publish requests answered, by result: ok or the error code (ERR_INVALID_EVENTS, ERR_BACKPRESSURE, …).',
      labelNames: ['result'],
      registers,
    }),
    eventsReceived: new Counter({
      name: 'agent_ingress_events_received_total',
      help: 'Events in acknowledged Publish requests.',
      registers,
    }),
    eventsMatched: new Counter({
      name: 'agent_ingress_events_matched_total',
      help: 'Acknowledged events that matched at least one subscription.',
      registers,
    }),
    recordsDelivered: new Counter({
      name: 'agent_ingress_sink_records_delivered_total',
      help: 'Records written by a sink (first try or spool replay).',
      labelNames: ['sink'],
      registers,
    }),
    recordsSpooled: new Counter({
      name: 'agent_ingress_spool_records_appended_total',
      help: 'Records appended to a destination spool because its sink was failing.',
      labelNames: ['sink'],
      registers,
    }),
    sinkErrors: new Counter({
      name: 'agent_ingress_sink_write_errors_total',
      help: 'Failed sink writes.',
      labelNames: ['sink', 'retriable'],
      registers,
    }),
    batchRecords: new Histogram({
      name: 'agent_ingress_sink_batch_records',
      help: 'Records per sink write.',
      labelNames: ['sink'],
      buckets: [1, 10, 100, 500, 1000, 2500, 5000, 10000, 50000],
      registers,
    }),
    sinkWriteSeconds: new Histogram({
      name: 'agent_ingress_sink_write_seconds',
      help: 'Duration of sink writes, successful or not.',
      labelNames: ['sink'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    publishSeconds: new Histogram({
      name: 'agent_ingress_publish_seconds',
      help: 'Publish latency, from arrival to acknowledgement (or error).',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    inflightRequests: new Gauge({
      name: 'agent_ingress_ingest_inflight_requests',
      help: 'Publish requests being processed and PublishStreams open (MAX_INFLIGHT_REQUESTS).',
      registers,
    }),
    inflightBytes: new Gauge({
      name: 'agent_ingress_ingest_inflight_bytes',
      help: 'Bytes ingest requests and streams hold in the service (MAX_INFLIGHT_BYTES).',
      registers,
    }),
    workerUtilization: new Gauge({
      name: 'agent_ingress_worker_utilization_ratio',
      help: 'Busy fraction of the route-events worker threads.',
      registers,
    }),
    destinations: new Gauge({
      name: 'agent_ingress_destinations',
      help: 'Open destinations by delivery status (ok, retrying, parked).',
      labelNames: ['status'],
      registers,
    }),
    backlogRecords: new Gauge({
      name: 'agent_ingress_spool_backlog_records',
      help: 'Records waiting in destination spools.',
      registers,
    }),
    backlogBytes: new Gauge({
      name: 'agent_ingress_spool_backlog_bytes',
      help: 'Bytes waiting in destination spools.',
      registers,
    }),
    connectionsRefused: new Counter({
      name: 'agent_ingress_listener_connections_refused_total',
      help: 'Connections a listener refused at accept, by listener (api, grpc, edge_http, edge_https, tcp, ssh, dns_tcp) and limit (max_connections, open_files, max_startups).',
      labelNames: ['listener', 'limit'],
      registers,
    }),
    connectionsCut: new Counter({
      name: 'agent_ingress_listener_connections_closed_total',
      help: 'Accepted connections a listener closed for a limit, by listener and limit (login_grace, auth_tries, idle_timeout, timeout).',
      labelNames: ['listener', 'limit'],
      registers,
    }),
    sshChannelsRefused: new Counter({
      name: 'agent_ingress_ssh_channels_refused_total',
      help: 'Session channels an agent opened beyond the number one SSH connection may hold.',
      registers,
    }),
    storeWasmMemory: new Gauge({
      name: 'agent_ingress_store_wasm_memory_bytes',
      help: "WebAssembly memory of the embedded store (PGlite, in the store's own process; as it last reported, every 10 s); 0 with PostgreSQL.",
      registers,
      collect() {
        this.set(sources.storeWasmMemoryBytes?.() ?? 0);
      },
    }),
  };
  // Every kind of sink is shown from the start, at zero: a dashboard need not wait for traffic.
  for (const sink of sources.sinkKinds ?? []) {
    metrics.recordsDelivered.inc({ sink }, 0);
    metrics.recordsSpooled.inc({ sink }, 0);
    for (const retriable of ['true', 'false']) metrics.sinkErrors.inc({ sink, retriable }, 0);
  }
  return metrics;
}

/** The metrics every component records into. */
export type Metrics = ReturnType<typeof createMetrics>;
