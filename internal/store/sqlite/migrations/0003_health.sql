-- hale schema, version 3: health findings and repairs.

CREATE TABLE findings (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id  TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    logical_id  TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    fault       TEXT    NOT NULL,
    body        TEXT    NOT NULL
);
CREATE INDEX findings_by_node ON findings (cluster_id, logical_id, at);

CREATE TABLE repairs (
    id          TEXT    PRIMARY KEY,
    cluster_id  TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    logical_id  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    body        TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX repairs_open ON repairs (cluster_id, created_at) WHERE state NOT IN ('Done', 'Failed', 'Quarantined', 'Cancelled');
CREATE INDEX repairs_by_node ON repairs (cluster_id, logical_id, created_at);
