import { api } from '/console/api.js';
import { SourceError } from '/console/source-error.js';
import { TapEvents, useTapStream, useTypingPause } from '/console/tap.js';
import { html, useEffect, useState } from '/console/vendor/preact-htm.js';

// What does it match right now? Each subscription's sources with a tap on each, and a filter
// editor that compiles as you type (POST /filters/preview) and streams what the filter matches.

const TRAFFIC_TYPES = ['http_request_complete.v0', 'tcp_connection_closed.v0'];

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

/** The compile error under the filter: its message and a caret at its position. */
function FilterError({ error, filter }) {
  const at = error.body?.details?.position;
  return html`<${SourceError} error=${error} text=${filter} at=${at} className="filter-error" />`;
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
  useTypingPause(
    () =>
      preview.start('POST', '/filters/preview?max_seconds=300', {
        type,
        filter,
        fields: fieldList,
      }),
    [type, filter, fields],
  );
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
