-- A session's display name belongs to the member whose session first
-- used it (by its messages.NameKey), for as long as that member is in the
-- mesh: another member's session is refused it, so `send <name>` never
-- reaches another member's key after the first holder's session ends.
-- Keep in step with the other backend's 0023_session_names.sql.
CREATE TABLE session_name (
  mesh_id   TEXT NOT NULL,
  name_key  TEXT NOT NULL,
  member_id TEXT NOT NULL,
  name      TEXT NOT NULL,
  PRIMARY KEY (mesh_id, name_key)
);
