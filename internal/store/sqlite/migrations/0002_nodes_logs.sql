-- hale schema, version 2: cluster state, node lookup by instance id alone (agents register with
-- their instance id), and log streams.

ALTER TABLE clusters ADD COLUMN state TEXT NOT NULL DEFAULT '{}';

CREATE INDEX nodes_by_instance_any ON nodes (instance_id) WHERE instance_id != '';

CREATE TABLE log_streams (
    log_group   TEXT    NOT NULL,
    log_stream  TEXT    NOT NULL,
    cluster_id  TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    last_event  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (log_group, log_stream)
) WITHOUT ROWID;

CREATE TABLE log_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    log_group  TEXT    NOT NULL,
    log_stream TEXT    NOT NULL,
    time       INTEGER NOT NULL,
    message    TEXT    NOT NULL
);
CREATE INDEX log_events_by_stream ON log_events (log_group, log_stream, seq);
