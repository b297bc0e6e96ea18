-- hale schema, version 8: what real kubelets need to join a registered Kubernetes cluster
-- (store.KubeNodeJoin as JSON; NULL for a registration made before, which hale then asks to be
-- made again).

ALTER TABLE kube_clusters ADD COLUMN node_join BLOB;
