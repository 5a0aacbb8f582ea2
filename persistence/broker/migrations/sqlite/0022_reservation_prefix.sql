-- A request is compared only with the reservations that can overlap it:
-- those whose prefix (pathglob.Pattern.Prefix, the literal directory
-- every path a pattern covers lies in; '' for a pattern that can cover a
-- path anywhere) is the request's, a directory of it, or within it. Rows
-- of an older broker have '' and are compared with every request until
-- they run out. member_id is indexed for the bound on what one member
-- holds in a repository (MaxReservationsPerMember). Keep in step with the
-- other backend's 0022_reservation_prefix.sql.
ALTER TABLE reservation ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
CREATE INDEX reservation_prefix ON reservation (mesh_id, repo, prefix);
CREATE INDEX reservation_member ON reservation (mesh_id, repo, member_id);
