import { api } from '/console/api.js';
import { html, useEffect, useState } from '/console/vendor/preact-htm.js';

// This account's Agent Ingresses: where agents connect (domain, region domains, name servers)
// and where their certificates stand (policy, renewal, the provisioning job's state).

function certificate(ingress) {
  const status = ingress.certificate_management_status;
  if (status === null) return 'off';
  const job = status.provisioning_job;
  if (job === null) return status.renews_at ? `renews ${status.renews_at}` : 'pending';
  const failing = job.error_code ? `${job.error_code}: ` : '';
  const retry = job.retries_at ? ` (retries ${job.retries_at})` : '';
  return `${failing}${job.msg}${retry}`;
}

export function IngressesPage() {
  const [ingresses, setIngresses] = useState(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    api('GET', '/agent_ingresses?limit=100')
      .then((page) => setIngresses(page.ingresses))
      .catch((failure) => setError(failure.message));
  }, []);
  return html`<section>
    <h2>Agent Ingresses <small>this account</small></h2>
    ${error && html`<p class="error">${error}</p>`}
    ${ingresses?.length === 0 && html`<p>No Agent Ingresses yet.</p>`}
    ${
      ingresses?.length > 0 &&
      html`<table class="ingresses">
      <thead>
        <tr><th>Domain</th><th>Region domains</th><th>Name servers</th><th>Certificate</th></tr>
      </thead>
      <tbody>
        ${ingresses.map(
          (ingress) => html`<tr key=${ingress.id} data-ingress=${ingress.id}>
            <td><strong>${ingress.domain}</strong><br /><code>${ingress.id}</code> ${ingress.description}</td>
            <td>${ingress.region_domains.join(', ')}</td>
            <td>${ingress.ns_targets.join(', ')}</td>
            <td class="certificate">${certificate(ingress)}</td>
          </tr>`,
        )}
      </tbody>
    </table>`
    }
  </section>`;
}
