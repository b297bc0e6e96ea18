-- hale schema, version 5: the orchestrator's state moves out of the cluster's state and the
-- nodes' details into records the orchestrator owns (one per cluster, one per node, keyed by the
-- node's logical id so it survives replacements). The data of existing Slurm clusters moves
-- with it.

CREATE TABLE orchestrator_records (
    cluster_id TEXT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (cluster_id, scope)
) WITHOUT ROWID;

-- The cluster's Slurm state becomes its record. Generation counted UpdateCluster calls for any
-- orchestrator, so it stays in the cluster's state as UpdateGeneration. An EKS cluster had a
-- Slurm state that only said it has no Slurm: it gets no record, which its own orchestrator
-- would otherwise find under its scope.
INSERT INTO orchestrator_records (cluster_id, scope, kind, body)
SELECT id, '', 'slurm', json_remove(json_extract(state, '$.Slurm'), '$.Generation')
FROM clusters WHERE json_type(state, '$.Slurm') = 'object' AND json_type(spec, '$.Orchestrator.Eks') IS NULL;

UPDATE clusters SET state = CASE
        WHEN json_type(state, '$.Slurm.Generation') = 'integer'
        THEN json_set(json_remove(state, '$.Slurm'), '$.UpdateGeneration', json_extract(state, '$.Slurm.Generation'))
        ELSE json_remove(state, '$.Slurm')
    END
WHERE json_type(state, '$.Slurm') IS NOT NULL;

-- A node's Slurm keys become its record, renamed. ConfInstance is the instance whose files hold
-- Conf: the node's current one, since hale cleared SlurmConf when it replaced an instance.
-- json_patch drops the keys a node lacked (json_object made them null).
INSERT INTO orchestrator_records (cluster_id, scope, kind, body)
SELECT cluster_id, logical_id, 'slurm', json_patch('{}', json_object(
        'Conf', json_extract(details, '$.SlurmConf'),
        'ConfInstance', CASE WHEN json_type(details, '$.SlurmConf') IS NOT NULL THEN instance_id END,
        'State', json_extract(details, '$.SlurmState'),
        'Reason', json_extract(details, '$.SlurmReason'),
        'RepairRequest', json_extract(details, '$.RepairRequest'),
        'HaleDrain', json_extract(details, '$.HaleDrain')))
FROM nodes
WHERE json_type(details, '$.SlurmConf') IS NOT NULL OR json_type(details, '$.SlurmState') IS NOT NULL
    OR json_type(details, '$.SlurmReason') IS NOT NULL OR json_type(details, '$.RepairRequest') IS NOT NULL
    OR json_type(details, '$.HaleDrain') IS NOT NULL;

UPDATE nodes SET details = json_remove(details, '$.SlurmConf', '$.SlurmState', '$.SlurmReason', '$.RepairRequest', '$.HaleDrain')
WHERE json_type(details, '$.SlurmConf') IS NOT NULL OR json_type(details, '$.SlurmState') IS NOT NULL
    OR json_type(details, '$.SlurmReason') IS NOT NULL OR json_type(details, '$.RepairRequest') IS NOT NULL
    OR json_type(details, '$.HaleDrain') IS NOT NULL;

-- Repairs name the node and its state generically.
UPDATE repairs SET body = json_remove(json_set(body, '$.NodeName', json_extract(body, '$.SlurmName')), '$.SlurmName')
WHERE json_type(body, '$.SlurmName') IS NOT NULL;

UPDATE repairs SET body = json_remove(json_set(body, '$.ServiceState', json_extract(body, '$.SlurmState')), '$.SlurmState')
WHERE json_type(body, '$.SlurmState') IS NOT NULL;
