-- The live agent sessions of every instance sharing the store. A session lives in the memory of
-- the instance its agent reached (owner_id, a random id per process); owner_url is that
-- instance's INTERNAL_URL ('' when it has none), where other instances relay its traffic and its
-- stop requests. The owner renews lease_until while the session lives: a row past its lease is
-- a crashed instance's and no longer counts (a claim deletes it).
CREATE TABLE agent_sessions (
  id               text PRIMARY KEY,
  account_id       text NOT NULL,
  -- What the session serves: its hostname (HTTP) or its reserved address (host:port, TCP).
  endpoint         text NOT NULL,
  owner_id         text NOT NULL,
  owner_url        text NOT NULL,
  credential_id    text NOT NULL,
  credential_kind  text NOT NULL,
  agent_ip         text NOT NULL,
  agent_version    text NOT NULL,
  region           text NOT NULL,
  started_at       timestamptz NOT NULL,
  lease_until      timestamptz NOT NULL
);
-- One live session per endpoint across instances.
CREATE UNIQUE INDEX agent_sessions_endpoint ON agent_sessions (endpoint);
CREATE INDEX agent_sessions_account ON agent_sessions (account_id, id);
CREATE INDEX agent_sessions_owner ON agent_sessions (owner_id);
