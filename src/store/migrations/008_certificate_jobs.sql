-- The certificate job runner: a job is leased by one instance at a time (lease_owner until
-- lease_until); attempts counts failures for the backoff. A subject has one unfinished job at
-- most, so two instances scheduling a renewal at once queue it once.
ALTER TABLE jobs ADD COLUMN lease_owner text;
ALTER TABLE jobs ADD COLUMN lease_until timestamptz;
ALTER TABLE jobs ADD COLUMN attempts integer NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX jobs_one_active ON jobs (subject_id) WHERE state IN ('queued', 'running', 'failed');

-- An Agent Ingress's automatic certificate and when it renews (reserved domains keep theirs in
-- their fields).
ALTER TABLE agent_ingresses ADD COLUMN certificate_id text;
ALTER TABLE agent_ingresses ADD COLUMN renews_at timestamptz;

-- DNS-01 challenges being validated: the TXT records the authoritative DNS answers meanwhile.
CREATE TABLE acme_challenges (
  name        text NOT NULL,
  value       text NOT NULL,
  job_id      text NOT NULL,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (name, value)
);

-- The service's ACME account per directory; its key sealed with the secrets keyring.
CREATE TABLE acme_accounts (
  directory_url text PRIMARY KEY,
  sealed_key    text NOT NULL,
  created_at    timestamptz NOT NULL
);
