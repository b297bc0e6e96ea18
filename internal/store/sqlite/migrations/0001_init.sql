-- hale schema, version 1. Times are Unix milliseconds (UTC). JSON columns hold api shapes.

CREATE TABLE clusters (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL UNIQUE,
    arn             TEXT    NOT NULL UNIQUE,
    status          TEXT    NOT NULL,
    failure_message TEXT    NOT NULL DEFAULT '',
    spec            TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX clusters_by_time ON clusters (created_at, seq);

CREATE TABLE instance_groups (
    cluster_id        TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name              TEXT    NOT NULL,
    position          INTEGER NOT NULL,
    spec              TEXT    NOT NULL,
    state             TEXT    NOT NULL,
    training_plan_arn TEXT    NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (cluster_id, name)
);
CREATE INDEX instance_groups_by_plan ON instance_groups (training_plan_arn) WHERE training_plan_arn != '';

CREATE TABLE nodes (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id     TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    instance_id    TEXT    NOT NULL DEFAULT '',
    logical_id     TEXT    NOT NULL,
    group_name     TEXT    NOT NULL,
    instance_type  TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    status_message TEXT    NOT NULL DEFAULT '',
    launch_time    INTEGER NOT NULL,
    details        TEXT    NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX nodes_by_instance ON nodes (cluster_id, instance_id) WHERE instance_id != '';
CREATE UNIQUE INDEX nodes_by_logical ON nodes (cluster_id, logical_id);
CREATE INDEX nodes_by_time ON nodes (cluster_id, launch_time, seq);
CREATE INDEX nodes_by_name ON nodes (cluster_id, group_name, instance_id, seq);
CREATE INDEX nodes_by_status ON nodes (cluster_id, group_name, status);

CREATE TABLE node_actions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id  TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    node_seq    INTEGER NOT NULL,
    instance_id TEXT    NOT NULL DEFAULT '',
    logical_id  TEXT    NOT NULL DEFAULT '',
    kind        TEXT    NOT NULL,
    params      TEXT    NOT NULL DEFAULT '{}',
    state       TEXT    NOT NULL,
    message     TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX node_actions_open ON node_actions (cluster_id, state) WHERE state IN ('Pending', 'InProgress');

CREATE TABLE events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT    NOT NULL UNIQUE,
    cluster_id    TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    cluster_name  TEXT    NOT NULL,
    cluster_arn   TEXT    NOT NULL,
    group_name    TEXT    NOT NULL DEFAULT '',
    instance_id   TEXT    NOT NULL DEFAULT '',
    resource_type TEXT    NOT NULL,
    level         TEXT    NOT NULL,
    time          INTEGER NOT NULL,
    description   TEXT    NOT NULL,
    metadata      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX events_by_time ON events (cluster_id, time, seq);

CREATE TABLE tags (
    resource_arn TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (resource_arn, key)
) WITHOUT ROWID;

CREATE TABLE access_keys (
    id         TEXT    PRIMARY KEY,
    secret     TEXT    NOT NULL,
    principal  TEXT    NOT NULL,
    actions    TEXT    NOT NULL,
    clusters   TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
