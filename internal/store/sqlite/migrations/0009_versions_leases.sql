-- hale schema, version 9: row versions, so that an update made from a stale read fails
-- (store.ErrConflict) instead of silently undoing another writer's change, and leases with
-- fencing tokens (store.Lease), which elect the one server that runs the reconcilers.

ALTER TABLE clusters ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE nodes ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE node_actions ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE repairs ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

CREATE TABLE leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    token      INTEGER NOT NULL, -- the fencing token: up by one at each change of holder
    expires_at INTEGER NOT NULL, -- epoch ms, the database's clock
    renewed_at INTEGER NOT NULL
) WITHOUT ROWID;
