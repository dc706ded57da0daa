import { api, session } from '/console/api.js';
import { EndpointsPage } from '/console/endpoints.js';
import { IngressesPage } from '/console/ingresses.js';
import { PipelinePage } from '/console/pipeline.js';
import { SessionsPage } from '/console/sessions.js';
import { SubscriptionsPage } from '/console/subscriptions.js';
import { html, render, useEffect, useState } from '/console/vendor/preact-htm.js';

// The console's shell: sign-in with an API key (checked with GET /account), then the pages
// chosen by the URL's hash, so a reload keeps the page and the key stays in this tab only.

const PAGES = {
  pipeline: { title: 'Pipeline', Page: PipelinePage },
  subscriptions: { title: 'Subscriptions', Page: SubscriptionsPage },
  endpoints: { title: 'Endpoints', Page: EndpointsPage },
  ingresses: { title: 'Agent Ingresses', Page: IngressesPage },
  sessions: { title: 'Agent sessions', Page: SessionsPage },
};

function SignIn({ onSignedIn }) {
  const [error, setError] = useState('');
  async function submit(event) {
    event.preventDefault();
    const key = new FormData(event.target).get('key').trim();
    try {
      const account = await api('GET', '/account', undefined, key);
      session.signIn(key);
      onSignedIn(account);
    } catch (failure) {
      setError(failure.message);
    }
  }
  return html`<form class="sign-in" onSubmit=${submit}>
    <h1>Agent Ingress</h1>
    <label>API key <input name="key" type="password" autocomplete="off" required /></label>
    <button type="submit">Sign in</button>
    <p class="hint">The key stays in this tab (sessionStorage) and is sent only to this service.</p>
    ${error && html`<p class="error" role="alert">${error}</p>`}
  </form>`;
}

function currentPage() {
  const name = location.hash.replace(/^#\/?/, '');
  return Object.hasOwn(PAGES, name) ? name : 'pipeline';
}

function App() {
  const [account, setAccount] = useState(undefined);
  const [page, setPage] = useState(currentPage());
  useEffect(() => {
    const onHash = () => setPage(currentPage());
    addEventListener('hashchange', onHash);
    if (session.key() !== null) {
      api('GET', '/account')
        .then(setAccount)
        .catch(() => setAccount(null));
    } else setAccount(null);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  if (account === undefined) return html`<p>Loading…</p>`;
  if (account === null) return html`<${SignIn} onSignedIn=${setAccount} />`;
  const { Page } = PAGES[page];
  const signOut = () => {
    session.signOut();
    setAccount(null);
  };
  return html`<header>
      <strong>Agent Ingress</strong>
      <nav>
        ${Object.entries(PAGES).map(
          ([name, { title }]) =>
            html`<a href="#/${name}" class=${name === page ? 'current' : ''}>${title}</a>`,
        )}
      </nav>
      <span class="account">${account.id}</span>
      <button onClick=${signOut}>Sign out</button>
    </header>
    <${Page} account=${account} />`;
}

render(html`<${App} />`, document.getElementById('app'));
