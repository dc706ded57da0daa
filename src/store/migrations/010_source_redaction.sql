-- Redaction of an event source (docs/security.md#redacted): header names it redacts on top of
-- the credential headers, and whether it keeps the credential headers and token query
-- parameters in clear (an explicit opt-in; false redacts them).
ALTER TABLE event_sources
  ADD COLUMN redact_headers jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN keep_credentials boolean NOT NULL DEFAULT false;
