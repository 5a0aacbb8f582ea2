-- Running brokers look for revoked members every few seconds
-- (RevokedSince): this index holds only the revoked ones.
CREATE INDEX member_revoked_idx ON member (revoked_at) WHERE revoked_at IS NOT NULL;
