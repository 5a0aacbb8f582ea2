-- A session row of a legacy hello: see ../sqlite/0018_legacy_sessions.sql.
ALTER TABLE mesh_session ADD COLUMN legacy BOOLEAN NOT NULL DEFAULT false;
