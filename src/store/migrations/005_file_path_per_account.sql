-- File destinations live in DATA_DIR/events/<account_id>/<path>: a path is unique within its
-- account only, and another account may use the same one (it cannot observe that it is taken).
DROP INDEX event_destinations_file_path;
CREATE UNIQUE INDEX event_destinations_file_path
  ON event_destinations (account_id, (target -> 'file' ->> 'path'))
  WHERE target ? 'file';
