-- Where events go. `target` is the full target, secrets included: the pipeline delivers from it,
-- while the API never shows the secrets.
CREATE TABLE event_destinations (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  description text NOT NULL DEFAULT '',
  metadata    text NOT NULL DEFAULT '',
  format      text NOT NULL DEFAULT 'JSON',
  target      jsonb NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX event_destinations_account ON event_destinations (account_id, id DESC);

-- Which events go where: sources (event kinds, each with its filter and field selection) and
-- the destinations they are delivered to.
CREATE TABLE event_subscriptions (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  description text NOT NULL DEFAULT '',
  metadata    text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL
);
CREATE INDEX event_subscriptions_account ON event_subscriptions (account_id, id DESC);

-- One row per event kind of a subscription; position keeps the order the user gave.
CREATE TABLE event_sources (
  subscription_id text NOT NULL REFERENCES event_subscriptions (id) ON DELETE CASCADE,
  type            text NOT NULL,
  filter          text NOT NULL DEFAULT '',
  fields          jsonb NOT NULL DEFAULT '[]',
  position        integer NOT NULL,
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (subscription_id, type)
);

-- No cascade on the destination: a destination a subscription still names cannot be deleted.
CREATE TABLE event_subscription_destinations (
  subscription_id text NOT NULL REFERENCES event_subscriptions (id) ON DELETE CASCADE,
  destination_id  text NOT NULL REFERENCES event_destinations (id),
  position        integer NOT NULL,
  PRIMARY KEY (subscription_id, destination_id)
);
CREATE INDEX event_subscription_destinations_destination
  ON event_subscription_destinations (destination_id);

-- Bumped in the transaction of every routing change; service instances poll it to know when
-- to reload their routing. The singleton key keeps it one row.
CREATE TABLE pipeline_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version   bigint NOT NULL
);
INSERT INTO pipeline_version (singleton, version) VALUES (true, 1);
