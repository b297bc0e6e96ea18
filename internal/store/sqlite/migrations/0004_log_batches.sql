-- hale schema, version 4: the log batches agents sent (LogLines.batch_id), so a batch an agent
-- sends again (its acknowledgement was lost with a server that died) is stored once.

CREATE TABLE log_batches (
    batch_id   TEXT    PRIMARY KEY,
    cluster_id TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    at         INTEGER NOT NULL
) WITHOUT ROWID;
