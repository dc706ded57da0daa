import { api } from '/console/api.js';
import { html, useEffect, useState } from '/console/vendor/preact-htm.js';

// This account's live agent sessions on this instance (GET /tunnel_sessions), refreshed every
// two seconds, each with a button that stops it (POST /tunnel_sessions/{id}/stop).

export function SessionsPage() {
  const [sessions, setSessions] = useState(undefined);
  const [error, setError] = useState('');
  const load = () =>
    api('GET', '/tunnel_sessions?limit=100')
      .then((page) => {
        setSessions(page.tunnel_sessions);
        setError('');
      })
      .catch((failure) => setError(failure.message));
  useEffect(() => {
    load();
    const timer = setInterval(load, 2000);
    return () => clearInterval(timer);
  }, []);
  async function stop(id) {
    try {
      await api('POST', `/tunnel_sessions/${id}/stop`);
      await load();
    } catch (failure) {
      setError(failure.message);
    }
  }
  return html`<section>
    <h2>Agent sessions <small>this account, live on this instance</small></h2>
    ${error && html`<p class="error">${error}</p>`}
    ${sessions?.length === 0 && html`<p class="no-sessions">No live agent sessions.</p>`}
    ${
      sessions?.length > 0 &&
      html`<table class="sessions">
      <thead>
        <tr><th>Session</th><th>Agent</th><th>From</th><th>Region</th><th>Started</th><th></th></tr>
      </thead>
      <tbody>
        ${sessions.map(
          (session) => html`<tr key=${session.id} data-session=${session.id}>
            <td><code>${session.id}</code></td>
            <td>${session.agent_version} (${session.transport})<br /><code>${session.credential.id}</code></td>
            <td>${session.ip}</td>
            <td>${session.region}</td>
            <td>${session.started_at}</td>
            <td><button onClick=${() => stop(session.id)}>Stop</button></td>
          </tr>`,
        )}
      </tbody>
    </table>`
    }
  </section>`;
}
