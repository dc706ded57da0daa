-- Accounts own every object; an API key acts for its account.
CREATE TABLE accounts (
  id          text PRIMARY KEY,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Tokens are never stored: only their SHA-256, looked up by hash.
CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  description text NOT NULL DEFAULT '',
  metadata    text NOT NULL DEFAULT '',
  token_hash  bytea NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL
);
CREATE INDEX api_keys_account ON api_keys (account_id, id DESC);

-- Ids sort by creation time, so (account_id, id DESC) serves newest-first pages.
CREATE TABLE agent_ingresses (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  description text NOT NULL DEFAULT '',
  metadata    text NOT NULL DEFAULT '',
  domain      text NOT NULL UNIQUE,
  cert_policy jsonb,
  created_at  timestamptz NOT NULL
);
CREATE INDEX agent_ingresses_account ON agent_ingresses (account_id, id DESC);

-- Background work (certificate provisioning); a later worker takes queued rows.
CREATE TABLE jobs (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  kind        text NOT NULL,
  subject_id  text NOT NULL,
  state       text NOT NULL,
  msg         text NOT NULL,
  error_code  text,
  started_at  timestamptz NOT NULL,
  retries_at  timestamptz,
  created_at  timestamptz NOT NULL
);
CREATE INDEX jobs_subject ON jobs (subject_id, created_at DESC);
CREATE INDEX jobs_queued ON jobs (state, created_at) WHERE state = 'queued';

-- Transactional outbox: an audit event is written with the change that caused it.
CREATE TABLE audit_outbox (
  seq          bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE,
  account_id   text NOT NULL,
  event_type   text NOT NULL,
  envelope     jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
CREATE INDEX audit_outbox_pending ON audit_outbox (seq) WHERE delivered_at IS NULL;
