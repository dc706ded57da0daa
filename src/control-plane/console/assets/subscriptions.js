import { api, stream } from '/console/api.js';
import { html, useEffect, useRef, useState } from '/console/vendor/preact-htm.js';

// What does it match right now? Each subscription's sources with a tap on each, and a filter
// editor that compiles as you type (POST /filters/preview) and streams what the filter matches.

const TRAFFIC_TYPES = ['http_request_complete.v0', 'tcp_connection_closed.v0'];
const SHOWN = 50;
const TYPING_PAUSE_MS = 300;

/**
 * Runs one stream at a time (`start` replaces the current one) and keeps its last SHOWN events,
 * newest first, with the tap's counts and how it ended.
 */
function useTapStream() {
  const [state, setState] = useState({ events: [], status: 'idle', error: undefined, info: '' });
  const current = useRef();
  const stop = () => current.current?.abort();
  useEffect(() => stop, []);
  function start(method, path, body) {
    stop();
    const abort = new AbortController();
    current.current = abort;
    setState({ events: [], status: 'opening', error: undefined, info: '' });
    const onEvent = (name, data) => {
      if (abort.signal.aborted) return;
      if (name === 'open') {
        const info = `at most ${data.rate}/s, for ${data.max_seconds} s`;
        setState((s) => ({ ...s, status: 'open', info }));
      } else if (name === 'event') {
        setState((s) => ({ ...s, events: [data, ...s.events].slice(0, SHOWN) }));
      } else if (name === 'end') {
        const info = `ended (${data.reason}): ${data.shown} shown of ${data.matched} matched`;
        setState((s) => ({ ...s, status: 'ended', info }));
      }
    };
    stream(method, path, { body, signal: abort.signal, onEvent }).catch((error) => {
      if (!abort.signal.aborted) setState((s) => ({ ...s, status: 'failed', error }));
    });
  }
  return { state, start, stop };
}

function TapEvents({ state }) {
  return html`<div class="tap">
    <p class="tap-status" data-status=${state.status}>${state.status} ${state.info}</p>
    <ol class="tap-events">
      ${state.events.map(
        (message) => html`<li key=${message.shown}>
          ${message.sampled && html`<span class="sampled">sample: ${message.skipped} skipped</span>`}
          <pre>${JSON.stringify(message.event)}</pre>
        </li>`,
      )}
    </ol>
  </div>`;
}

function Source({ subscription, source, onEdit }) {
  const tap = useTapStream();
  const path = `/event_subscriptions/${subscription.id}/sources/${source.type}/tap?max_seconds=300`;
  const open = tap.state.status === 'open' || tap.state.status === 'opening';
  return html`<li class="source" data-source=${source.type}>
    <code>${source.type}</code>
    <span class="filter">${source.filter || '(every event)'}</span>
    <span class="fields">${source.fields?.length ? source.fields.join(', ') : 'all fields'}</span>
    <button onClick=${() => (open ? tap.stop() : tap.start('GET', path))}>
      ${open ? 'Close tap' : 'Tap'}
    </button>
    <button onClick=${() => onEdit(subscription, source)}>Edit filter</button>
    ${tap.state.status !== 'idle' && html`<${TapEvents} state=${tap.state} />`}
    ${tap.state.error && html`<p class="error">${tap.state.error.message}</p>`}
  </li>`;
}

/** The line of the error, and under it a caret at `column` (1-based). */
function caret(line, column) {
  return `${line}\n${' '.repeat(Math.max(0, column - 1))}^`;
}

/** The compile error under the filter: its message and a caret at its column. */
function FilterError({ error, filter }) {
  const position = error.body?.details?.position;
  const line = position ? filter.split('\n')[position.line - 1] : undefined;
  return html`<div class="filter-error" role="alert">
    <p>
      <strong>${error.body?.error_code ?? 'error'}</strong>
      ${position && html` at line ${position.line}, column ${position.column}`}: ${error.message}
    </p>
    ${line !== undefined && html`<pre class="caret">${caret(line, position.column)}</pre>`}
  </div>`;
}

function FilterEditor({ editing, onSaved }) {
  const [type, setType] = useState(TRAFFIC_TYPES[0]);
  const [filter, setFilter] = useState('');
  const [fields, setFields] = useState('');
  const [saved, setSaved] = useState('');
  const preview = useTapStream();
  useEffect(() => {
    if (!editing) return;
    setType(editing.source.type);
    setFilter(editing.source.filter ?? '');
    setFields((editing.source.fields ?? []).join(', '));
  }, [editing]);
  const fieldList = fields
    .split(',')
    .map((field) => field.trim())
    .filter((field) => field !== '');
  useEffect(() => {
    const timer = setTimeout(() => {
      preview.start('POST', '/filters/preview?max_seconds=300', {
        type,
        filter,
        fields: fieldList,
      });
    }, TYPING_PAUSE_MS);
    return () => clearTimeout(timer);
  }, [type, filter, fields]);
  async function save() {
    const { subscription, source } = editing;
    try {
      await api('PATCH', `/event_subscriptions/${subscription.id}/sources/${source.type}`, {
        filter,
        fields: fieldList,
      });
      setSaved(`saved to ${subscription.id}`);
      onSaved();
    } catch (error) {
      setSaved(`not saved: ${error.message}`);
    }
  }
  const { state } = preview;
  return html`<section class="editor">
    <h2>Filter editor <small>compiles as you type; shows what it matches now</small></h2>
    <label>Event type
      <select value=${type} onChange=${(e) => setType(e.target.value)} disabled=${!!editing}>
        ${TRAFFIC_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
      </select>
    </label>
    <label>Filter (CEL)
      <textarea id="filter" rows="3" spellcheck="false" value=${filter}
        onInput=${(e) => setFilter(e.target.value)} placeholder="conn.server_port == 443"></textarea>
    </label>
    <label>Fields (comma-separated; empty: all)
      <input id="fields" value=${fields} onInput=${(e) => setFields(e.target.value)} />
    </label>
    ${
      editing &&
      html`<p>Editing <code>${editing.subscription.id}</code> / <code>${editing.source.type}</code>
      <button onClick=${save} disabled=${!!state.error}>Save</button> ${saved}</p>`
    }
    ${
      state.error
        ? html`<${FilterError} error=${state.error} filter=${filter} />`
        : html`<p class="compiles">${state.status === 'opening' ? 'compiling…' : 'compiles'}</p>`
    }
    ${!state.error && html`<${TapEvents} state=${state} />`}
  </section>`;
}

export function SubscriptionsPage() {
  const [subscriptions, setSubscriptions] = useState(undefined);
  const [error, setError] = useState('');
  const [editing, setEditing] = useState(undefined);
  const load = () =>
    api('GET', '/event_subscriptions?limit=100')
      .then((page) => setSubscriptions(page.event_subscriptions))
      .catch((failure) => setError(failure.message));
  useEffect(() => {
    load();
  }, []);
  const edit = (subscription, source) => setEditing({ subscription, source });
  return html`<section>
    <h2>Subscriptions <small>this account</small></h2>
    ${error && html`<p class="error">${error}</p>`}
    ${subscriptions?.length === 0 && html`<p>No event subscriptions yet.</p>`}
    <ul class="subscriptions">
      ${(subscriptions ?? []).map(
        (subscription) => html`<li key=${subscription.id} data-subscription=${subscription.id}>
          <code>${subscription.id}</code> ${subscription.description}
          → ${subscription.destinations.map((d) => html`<code>${d.id}</code> `)}
          <ul>
            ${subscription.sources.map(
              (source) =>
                html`<${Source} key=${source.type} subscription=${subscription} source=${source}
                  onEdit=${edit} />`,
            )}
          </ul>
        </li>`,
      )}
    </ul>
    <${FilterEditor} editing=${editing} onSaved=${load} />
  </section>`;
}
