-- hale schema, version 6: the Kubernetes clusters registered with hale, which Eks clusters'
-- Orchestrator.Eks.ClusterArn name.

CREATE TABLE kube_clusters (
    name       TEXT    PRIMARY KEY,
    arn        TEXT    NOT NULL UNIQUE,
    kubeconfig BLOB    NOT NULL,
    local      INTEGER NOT NULL DEFAULT 0,
    server     TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
