-- What a session serves, as ngrok's Tunnel and agent Endpoint show it (GET /tunnels, GET
-- /endpoints): its protocol (http, https, tcp: its URL is <proto>://<endpoint>) and where the
-- agent forwards to (an ngrok agent's Bind says; an SSH client does not). Rows of sessions live
-- at the upgrade get the defaults until their sessions end.
ALTER TABLE agent_sessions ADD COLUMN proto text NOT NULL DEFAULT 'http';
ALTER TABLE agent_sessions ADD COLUMN forwards_to text NOT NULL DEFAULT '';
