import { api, stream } from '/console/api.js';
import { html, useEffect, useState } from '/console/vendor/preact-htm.js';

// Is it flowing, and where does it fail? The service-wide counters of /metrics, one snapshot a
// second over SSE, turned into rates; and this account's destinations with their health.

const COUNTERS = [
  ['events_received', 'Received'],
  ['events_matched', 'Matched'],
  ['records_delivered', 'Delivered'],
  ['records_spooled', 'Spooled'],
  ['requests_rejected', 'Rejected (requests)'],
];

function useStats() {
  const [state, setState] = useState({ stats: undefined, rates: {}, error: '' });
  useEffect(() => {
    const abort = new AbortController();
    let previous;
    stream('GET', '/pipeline/stats', {
      signal: abort.signal,
      onEvent(_name, stats) {
        const seconds = previous && (Date.parse(stats.at) - Date.parse(previous.at)) / 1000;
        const rates = {};
        for (const [key] of COUNTERS) {
          rates[key] = seconds > 0 ? (stats[key] - previous[key]) / seconds : 0;
        }
        previous = stats;
        setState({ stats, rates, error: '' });
      },
    }).catch((error) => abort.signal.aborted || setState((s) => ({ ...s, error: error.message })));
    return () => abort.abort();
  }, []);
  return state;
}

function Counters() {
  const { stats, rates, error } = useStats();
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
  return html`<section>
    <h2>Pipeline <small>all accounts of this service, live</small></h2>
    <${Counters} />
    <h2>Destinations <small>this account</small></h2>
    <${Destinations} />
  </section>`;
}
