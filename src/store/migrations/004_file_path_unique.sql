-- Two file destinations in one directory would rename each other's open files and mix accounts'
-- events: a file path belongs to one destination, service-wide.
CREATE UNIQUE INDEX event_destinations_file_path
  ON event_destinations ((target -> 'file' ->> 'path'))
  WHERE target ? 'file';
