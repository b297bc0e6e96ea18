-- hale schema, version 10: secrets, the few documents every server on a store must share and
-- no API returns (the agent CA's certificate and key, its revocations): several servers on one
-- store present one CA to the agents, whichever of them leads.

CREATE TABLE secrets (
    name       TEXT    PRIMARY KEY,
    value      BLOB    NOT NULL,
    updated_at INTEGER NOT NULL -- epoch ms
) WITHOUT ROWID;
