import { api } from '/console/api.js';
import { SourceError } from '/console/source-error.js';
import { TapEvents, useTapStream, useTypingPause } from '/console/tap.js';
import { html, useEffect, useRef, useState } from '/console/vendor/preact-htm.js';

// This account's cloud endpoints and their Traffic Policies: the list with what each policy
// does, an editor that checks the policy as you type (POST /endpoints/validate_policy; Save
// waits for a valid one), and a tap of an endpoint's requests with each module's decision.

const HTTP = 'http_request_complete.v0';
const STARTER_POLICY = `on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: hello
`;

/** "on_http_request: basic-auth, log" per phase the policy uses. */
function summaryText(phases) {
  if (phases.length === 0) return '(no rules)';
  return phases.map(({ phase, actions }) => `${phase}: ${actions.join(', ')}`).join('; ');
}

/** The policy's phases and action types, or why it does not compile. */
async function checkPolicy(text, url) {
  try {
    return {
      status: 'valid',
      text,
      phases: (await api('POST', '/endpoints/validate_policy', { traffic_policy: text, url }))
        .phases,
    };
  } catch (error) {
    return { status: 'invalid', text, error };
  }
}

// The list's summaries are asked one at a time: a page of 100 endpoints stays within the API
// key's burst (RATE_LIMIT_BURST) with room to spare for what the user does meanwhile.
let summaries = Promise.resolve();

/** What checkPolicy answers for a saved policy, once the summaries asked before it are in. */
function queuedCheck(text, url) {
  const check = summaries.then(() => checkPolicy(text, url));
  summaries = check;
  return check;
}

/** Where a policy error is in the document (details.location's line, and column if known). */
function documentPosition(error) {
  const location = error.body?.details?.location;
  return location?.line === undefined
    ? undefined
    : { line: location.line, column: location.column };
}

function EndpointRow({ endpoint, onEdit, onTap, onDeleted }) {
  const [summary, setSummary] = useState('…');
  useEffect(() => {
    if (!endpoint.traffic_policy) {
      setSummary('(no policy)');
      return;
    }
    queuedCheck(endpoint.traffic_policy, endpoint.url).then((check) =>
      setSummary(check.status === 'valid' ? summaryText(check.phases) : check.error.message),
    );
  }, [endpoint.traffic_policy]);
  const [failure, setFailure] = useState('');
  const remove = () =>
    api('DELETE', `/endpoints/${endpoint.id}`).then(
      () => onDeleted(endpoint.id),
      (error) => setFailure(`not deleted: ${error.message}`),
    );
  return html`<tr data-endpoint=${endpoint.id}>
    <td><strong class="url">${endpoint.url}</strong><br /><code>${endpoint.id}</code></td>
    <td>${endpoint.type}</td>
    <td>${endpoint.description}</td>
    <td class="summary">${summary}</td>
    <td>
      <button onClick=${() => onTap(endpoint)}>Tap</button>
      ${
        // An agent endpoint is its agent's: it changes and goes with the agent.
        endpoint.type === 'cloud' &&
        html`<button onClick=${() => onEdit(endpoint)}>Edit</button>
          <button onClick=${remove}>Delete</button>`
      }
      ${failure && html`<p class="error">${failure}</p>`}
    </td>
  </tr>`;
}

/** Checks `policy` once typing pauses; the answer for older text is dropped. */
function usePolicyCheck(policy, url) {
  const [check, setCheck] = useState({ status: 'checking', text: policy });
  const latest = useRef(policy);
  latest.current = policy;
  useTypingPause(() => {
    checkPolicy(policy, url).then((result) => {
      if (result.text === latest.current) setCheck(result);
    });
  }, [policy, url]);
  // Until the answer for this very text arrives, it is being checked.
  return check.text === policy ? check : { status: 'checking', text: policy };
}

function PolicyEditor({ editing, onSaved, onCancel }) {
  const [url, setUrl] = useState(editing.endpoint?.url ?? 'https://');
  const [description, setDescription] = useState(editing.endpoint?.description ?? '');
  const [policy, setPolicy] = useState(editing.endpoint?.traffic_policy ?? STARTER_POLICY);
  const [saved, setSaved] = useState('');
  const check = usePolicyCheck(policy, url);
  const { endpoint } = editing;
  async function save() {
    try {
      const fields = { description, traffic_policy: policy };
      const answer = endpoint
        ? await api('PATCH', `/endpoints/${endpoint.id}`, fields)
        : await api('POST', '/endpoints', { type: 'cloud', url, ...fields });
      setSaved(`saved ${answer.id}`);
      onSaved(answer);
    } catch (error) {
      setSaved(`not saved: ${error.message}`);
    }
  }
  return html`<section class="policy-editor">
    <h2>${endpoint ? html`Endpoint <code>${endpoint.id}</code>` : 'New cloud endpoint'}
      <small>the policy is checked as you type</small></h2>
    <label>URL
      <input id="endpoint-url" value=${url} disabled=${!!endpoint}
        onInput=${(e) => setUrl(e.target.value)} placeholder="https://app.example.com" />
    </label>
    <label>Description
      <input id="endpoint-description" value=${description}
        onInput=${(e) => setDescription(e.target.value)} />
    </label>
    <label>Traffic Policy (YAML or JSON)
      <textarea id="policy" rows="14" spellcheck="false" value=${policy}
        onInput=${(e) => setPolicy(e.target.value)}></textarea>
    </label>
    ${check.status === 'checking' && html`<p class="policy-checking">checking…</p>`}
    ${check.status === 'valid' && html`<p class="policy-valid">valid: ${summaryText(check.phases)}</p>`}
    ${
      check.status === 'invalid' &&
      html`<${SourceError} error=${check.error} text=${policy} at=${documentPosition(check.error)}
        className="policy-error" />`
    }
    <p>
      <button id="save-endpoint" onClick=${save} disabled=${check.status !== 'valid'}>Save</button>
      <button onClick=${onCancel}>Close</button>
      <span class="save-result">${saved}</span>
    </p>
  </section>`;
}

/** One request as the tap shows it: what was asked, what was answered, what each module decided. */
function requestDecisions(event) {
  const o = event.object;
  const decisions = [
    ['basic_auth', o.basic_auth.decision, o.basic_auth.username],
    ['ip_policy', o.ip_policy.decision],
    ['circuit_breaker', o.circuit_breaker.decision],
    [
      'compression',
      o.compression.algorithm,
      o.compression.bytes_saved ? `${o.compression.bytes_saved} bytes saved` : '',
    ],
    ['webhook_verification', o.webhook_verification.decision],
    ['oauth', o.oauth.decision, o.oauth.user.name],
  ];
  const logs = o.traffic_policy.logs;
  return html`<div class="request">
    <p>
      <span class="method">${o.http.request.method.toUpperCase()}</span>${' '}
      <code class="path">${o.http.request.url.path}</code> →${' '}
      <strong class="response-status">${o.http.response.status_code}</strong>${' '}
      <span class="hint">from ${o.conn.client_ip} at ${event.event_timestamp}</span>
    </p>
    <dl class="decisions">
      ${decisions.map(
        ([module, decision, detail]) => html`<div data-decision=${module}
            class=${decision === 'invalid' || decision === 'none' ? 'did-not-run' : ''}>
          <dt>${module}</dt><dd>${decision}${detail ? ` (${detail})` : ''}</dd>
        </div>`,
      )}
      <div data-decision="traffic_policy.logs" class=${logs.length === 0 ? 'did-not-run' : ''}>
        <dt>logs</dt><dd>${logs.length === 0 ? 'none' : JSON.stringify(logs)}</dd>
      </div>
    </dl>
  </div>`;
}

/** The endpoint's requests, live: a filter preview on the endpoint's hostname (conn.server_name). */
function EndpointTap({ endpoint, onClose }) {
  const tap = useTapStream();
  const filter = `conn.server_name == ${JSON.stringify(new URL(endpoint.url).hostname)}`;
  useEffect(() => {
    tap.start('POST', '/filters/preview?max_seconds=600', { type: HTTP, filter, fields: [] });
  }, [filter]);
  return html`<section class="endpoint-tap" data-tap=${endpoint.id}>
    <h2>Requests to ${endpoint.url} <small><code>${filter}</code></small>
      <button onClick=${onClose}>Close tap</button></h2>
    <${TapEvents} state=${tap.state} show=${requestDecisions} />
    ${tap.state.error && html`<p class="error">${tap.state.error.message}</p>`}
  </section>`;
}

export function EndpointsPage() {
  const [endpoints, setEndpoints] = useState(undefined);
  const [error, setError] = useState('');
  const [editing, setEditing] = useState(undefined);
  const [tapped, setTapped] = useState(undefined);
  const load = () =>
    api('GET', '/endpoints?limit=100')
      .then((page) => setEndpoints(page.endpoints))
      .catch((failure) => setError(failure.message));
  useEffect(() => {
    load();
  }, []);
  const deleted = (id) => {
    load();
    if (editing?.endpoint?.id === id) setEditing(undefined);
    if (tapped?.id === id) setTapped(undefined);
  };
  const saved = (endpoint) => {
    load();
    setEditing({ endpoint });
  };
  return html`<section>
    <h2>Endpoints <small>this account's cloud endpoints and their Traffic Policies</small>
      <button id="new-endpoint" onClick=${() => setEditing({})}>New endpoint</button></h2>
    ${error && html`<p class="error">${error}</p>`}
    ${endpoints?.length === 0 && html`<p class="no-endpoints">No endpoints yet.</p>`}
    ${
      endpoints?.length > 0 &&
      html`<table class="endpoints">
      <thead><tr><th>URL</th><th>Type</th><th>Description</th><th>Policy</th><th></th></tr></thead>
      <tbody>
        ${endpoints.map(
          (endpoint) => html`<${EndpointRow} key=${endpoint.id} endpoint=${endpoint}
            onEdit=${(e) => setEditing({ endpoint: e })} onTap=${setTapped} onDeleted=${deleted} />`,
        )}
      </tbody>
    </table>`
    }
    ${
      editing &&
      html`<${PolicyEditor} key=${editing.endpoint?.id ?? 'new'} editing=${editing}
        onSaved=${saved} onCancel=${() => setEditing(undefined)} />`
    }
    ${
      tapped &&
      html`<${EndpointTap} key=${tapped.id} endpoint=${tapped}
        onClose=${() => setTapped(undefined)} />`
    }
  </section>`;
}
