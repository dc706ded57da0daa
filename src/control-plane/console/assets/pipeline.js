import { api, stream } from '/console/api.js';
import { html, useEffect, useState } from '/console/vendor/preact-htm.js';

// Is it flowing, and where does it fail? This account's counters (GET /pipeline/stats), one
// snapshot a second over SSE, turned into rates: its events, each subscription's matches, and
// its destinations with their health.

const COUNTERS = [
  ['events_received', 'Received'],
  ['events_matched', 'Matched'],
  ['records_delivered', 'Delivered'],
  ['records_spooled', 'Spooled'],
  ['events_rejected', 'Rejected'],
];

/** Per second between two snapshots' values; 0 for the first. */
function rate(now, before, seconds) {
  return seconds > 0 && before !== undefined ? (now - before) / seconds : 0;
}

function useStats() {
  const [state, setState] = useState({ stats: undefined, rates: {}, matchRates: {}, error: '' });
  useEffect(() => {
    const abort = new AbortController();
    let previous;
    const onEvent = (name, stats) => {
      if (name !== 'stats') return;
      const seconds = previous && (Date.parse(stats.at) - Date.parse(previous.at)) / 1000;
      const rates = {};
      for (const [key] of COUNTERS) rates[key] = rate(stats[key], previous?.[key], seconds);
      const matchedBefore = new Map(previous?.subscriptions.map((s) => [s.id, s.events_matched]));
      const matchRates = {};
      for (const { id, events_matched } of stats.subscriptions) {
        matchRates[id] = rate(events_matched, matchedBefore.get(id), seconds);
      }
      previous = stats;
      setState({ stats, rates, matchRates, error: '' });
    };
    // A stream lasts max_seconds, then ends (`end`): the next one takes over.
    (async () => {
      while (!abort.signal.aborted) {
        await stream('GET', '/pipeline/stats?max_seconds=600', { signal: abort.signal, onEvent });
      }
    })().catch(
      (error) => abort.signal.aborted || setState((s) => ({ ...s, error: error.message })),
    );
    return () => abort.abort();
  }, []);
  return state;
}

function Counters({ stats, rates, error }) {
  if (error) return html`<p class="error">${error}</p>`;
  if (!stats) return html`<p>Connecting…</p>`;
  return html`<div class="counters">
    ${COUNTERS.map(
      ([key, label]) => html`<div class="counter" data-counter=${key}>
        <span class="label">${label}</span>
        <span class="rate">${rates[key].toFixed(1)}/s</span>
        <span class="total">${stats[key]}</span>
      </div>`,
    )}
    <div class="counter">
      <span class="label">Backlog</span>
      <span class="rate">${stats.backlog_records}</span>
      <span class="total">records in spools</span>
    </div>
  </div>`;
}

/** Each subscription's matches (after filter and sampling): events/s and since the start. */
function Subscriptions({ stats, matchRates }) {
  const [described, setDescribed] = useState({});
  useEffect(() => {
    const load = () =>
      api('GET', '/event_subscriptions?limit=100')
        .then((page) =>
          setDescribed(Object.fromEntries(page.event_subscriptions.map((s) => [s.id, s]))),
        )
        .catch(() => {});
    load();
    const timer = setInterval(load, 5000);
    return () => clearInterval(timer);
  }, []);
  if (!stats) return null;
  if (stats.subscriptions.length === 0) return html`<p>No event subscriptions yet.</p>`;
  return html`<table class="subscriptions">
    <thead>
      <tr><th>Subscription</th><th>Sources</th><th>Matched/s</th><th>Matched</th></tr>
    </thead>
    <tbody>
      ${stats.subscriptions.map(
        (s) => html`<tr key=${s.id} data-subscription-rate=${s.id}>
          <td><code>${s.id}</code><br />${described[s.id]?.description ?? ''}</td>
          <td>${s.types.join(', ')}</td>
          <td class="rate">${(matchRates[s.id] ?? 0).toFixed(1)}/s</td>
          <td class="total">${s.events_matched}</td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

function targetKind(destination) {
  return Object.keys(destination.target ?? {})[0] ?? '?';
}

function Destination({ destination }) {
  const [result, setResult] = useState('');
  const health = destination.health ?? { status: 'unknown', backlog: {} };
  async function test() {
    setResult('sending…');
    try {
      const answer = await api('POST', `/event_destinations/${destination.id}/test`);
      setResult(`${answer.status} ${answer.event_id}${answer.error ? `: ${answer.error}` : ''}`);
    } catch (error) {
      setResult(`failed: ${error.message}`);
    }
  }
  return html`<tr data-destination=${destination.id}>
    <td><code>${destination.id}</code><br />${destination.description}</td>
    <td>${targetKind(destination)}</td>
    <td><span class="status ${health.status}">${health.status}</span></td>
    <td>${health.backlog?.events ?? 0}</td>
    <td class="last-error">${health.last_error ?? ''}</td>
    <td>
      <button onClick=${test}>Send test event</button>
      <div class="test-result">${result}</div>
    </td>
  </tr>`;
}

function Destinations() {
  const [destinations, setDestinations] = useState(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    const load = () =>
      api('GET', '/event_destinations?limit=100')
        .then((page) => {
          setDestinations(page.event_destinations);
          setError('');
        })
        .catch((failure) => setError(failure.message));
    load();
    const timer = setInterval(load, 2000);
    return () => clearInterval(timer);
  }, []);
  if (error) return html`<p class="error">${error}</p>`;
  if (!destinations) return html`<p>Loading…</p>`;
  if (destinations.length === 0) return html`<p>No event destinations yet.</p>`;
  return html`<table class="destinations">
    <thead>
      <tr><th>Destination</th><th>Target</th><th>Status</th><th>Backlog</th><th>Last error</th><th></th></tr>
    </thead>
    <tbody>
      ${destinations.map((d) => html`<${Destination} key=${d.id} destination=${d} />`)}
    </tbody>
  </table>`;
}

export function PipelinePage() {
  const state = useStats();
  return html`<section>
    <h2>Pipeline <small>this account, live</small></h2>
    <${Counters} ...${state} />
    <h2>Subscriptions <small>match rate</small></h2>
    <${Subscriptions} ...${state} />
    <h2>Destinations</h2>
    <${Destinations} />
  </section>`;
}
