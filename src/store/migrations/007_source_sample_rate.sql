-- Sampling of an event source: the share of the events passing its filter that it delivers
-- (0 < r <= 1; 1 = every event). The pipeline keeps an event when a hash of its id falls below
-- r·2^32 (src/pipeline/sampling.ts), so the choice is the same on every instance and retry.
ALTER TABLE event_sources
  ADD COLUMN sample_rate double precision NOT NULL DEFAULT 1
  CHECK (sample_rate > 0 AND sample_rate <= 1);
