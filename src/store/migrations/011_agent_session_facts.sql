-- What an agent says of itself, which ngrok's agents do (Auth) and SSH clients do not: the
-- system it runs on, its host's name, its own metadata and user agent, and which protocol it
-- came in by (transport: 'ssh' or 'ngrok'). SSH sessions keep '' (and their bound hostname as
-- metadata, as before).
ALTER TABLE agent_sessions ADD COLUMN os text NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN arch text NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN hostname text NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN metadata text NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN user_agent text NOT NULL DEFAULT '';
ALTER TABLE agent_sessions ADD COLUMN transport text NOT NULL DEFAULT 'ssh';
