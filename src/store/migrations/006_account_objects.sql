-- The account objects of the audit catalogue's families (credentials, certificates, IP policies,
-- reserved addresses and domains, …) share one table: what a family shows beyond the common
-- columns is a JSON document, its secret (a sealed private key, a token hash) a column of its own.
CREATE TABLE account_objects (
  id            text PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id),
  kind          text NOT NULL,
  -- The object this one belongs to (an IP policy rule's policy).
  parent_id     text,
  -- What must not repeat within the kind: per account (scope = the account id) or across the
  -- service (scope = ''), e.g. an SSH key's fingerprint, a TCP address, a token's hash.
  unique_scope  text,
  unique_key    text,
  description   text NOT NULL DEFAULT '',
  metadata      text NOT NULL DEFAULT '',
  fields        jsonb NOT NULL,
  secret        text,
  created_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX account_objects_unique
  ON account_objects (kind, unique_scope, unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX account_objects_page ON account_objects (account_id, kind, id);
CREATE INDEX account_objects_parent ON account_objects (parent_id) WHERE parent_id IS NOT NULL;
