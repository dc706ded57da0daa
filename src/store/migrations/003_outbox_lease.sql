-- Relays claim outbox rows with a short lease instead of holding a transaction open while they
-- deliver (the embedded store has one connection), so several instances can relay safely.
ALTER TABLE audit_outbox ADD COLUMN lease_until timestamptz;
