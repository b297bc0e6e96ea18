-- hale schema on PostgreSQL, version 2 (SQLite's version 10): secrets, the few documents every
-- server on the store must share and no API returns (the agent CA's certificate and key, its
-- revocations).

CREATE TABLE secrets (
    name       TEXT    PRIMARY KEY,
    value      BYTEA   NOT NULL,
    updated_at BIGINT  NOT NULL
);
