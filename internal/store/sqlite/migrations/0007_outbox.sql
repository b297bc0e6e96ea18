-- hale schema, version 7: the outbox of events for other systems (internal/eventbridge). An
-- entry is written in the transaction of the change it describes, so it exists exactly when the
-- change committed; each sink (a webhook, a JSON-lines file) delivers the entries in seq order
-- and records how far it got in outbox_cursors, advanced only after a delivery. Entries every
-- configured sink has delivered are pruned.

CREATE TABLE outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused after a prune: cursors stay valid
    id         TEXT    NOT NULL UNIQUE,           -- the event's id, its receivers' idempotency key
    created_at INTEGER NOT NULL,                  -- epoch ms
    body       TEXT    NOT NULL                   -- the whole event as delivered (JSON)
);

CREATE TABLE outbox_cursors (
    sink       TEXT    PRIMARY KEY, -- "webhook <url>", "file <path>"
    seq        INTEGER NOT NULL,    -- the seq of the last entry the sink delivered
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
