// Package eventbridge gives other systems the events SageMaker HyperPod publishes to Amazon
// EventBridge, in EventBridge's own shape, through a webhook and/or a JSON-lines file
// (hale server --events-webhook, --events-file; docs/observability.md).
//
// The three detail-types are HyperPod's (the SageMaker developer guide, "Events that Amazon
// SageMaker AI sends to Amazon EventBridge", and the HyperPod cluster events reference):
//   - "SageMaker HyperPod Cluster State Change": a cluster's ClusterStatus changed; the detail is
//     the cluster as DescribeCluster shows it, CreationTime in epoch milliseconds;
//   - "SageMaker HyperPod Cluster Node Health Event": a node was found unhealthy (its repair's
//     action, or None when hale will not repair it by itself), or is healthy again;
//   - "SageMaker HyperPod Cluster Event": every ListClusterEvents record, its detail
//     {"EventDetails": <DescribeClusterEvent's record>}, EventTime in epoch milliseconds.
//
// Events are never lost and, past a receiver's idempotency key, never duplicated: the store
// writes each one to its outbox in the transaction of the change it describes (Publisher, called
// by the store), and a Deliverer hands the outbox to each sink in order, retrying forever with
// capped exponential backoff, advancing the sink's persisted cursor only after a delivery. An
// event's id is fixed when it is written, so a retry or a restart sends the same id again.
package eventbridge

import (
	"encoding/json"
	"strings"
	"time"
)

// EventBridge's envelope values for SageMaker's events.
const (
	// Version is the envelope's version: "0" in every AWS event.
	Version = "0"
	// Source is the source of SageMaker's events.
	Source = "aws.sagemaker"
	// TimeFormat is the envelope's time: UTC, to the second (e.g. 2025-04-28T16:59:01Z).
	TimeFormat = "2006-01-02T15:04:05Z"
)

// The detail-types HyperPod publishes.
const (
	ClusterStateChange = "SageMaker HyperPod Cluster State Change"
	NodeHealthEvent    = "SageMaker HyperPod Cluster Node Health Event"
	ClusterEvent       = "SageMaker HyperPod Cluster Event"
)

// Envelope is an EventBridge event: the fields every AWS event has (EventBridge user guide,
// "Amazon EventBridge events": version, id, detail-type, source, account, time, region,
// resources, detail), in that order.
type Envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"` // a UUID, the receivers' idempotency key
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"` // TimeFormat
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"` // the cluster's ARN
	Detail     json.RawMessage `json:"detail"`
}

// newEnvelope wraps a detail about the cluster clusterARN; its account and region are the ARN's
// (arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID), which are the server's.
func newEnvelope(id, detailType, clusterARN string, at time.Time, detail any) (*Envelope, error) {
	b, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	region, account := "", ""
	if parts := strings.SplitN(clusterARN, ":", 6); len(parts) == 6 {
		region, account = parts[3], parts[4]
	}
	return &Envelope{Version: Version, ID: id, DetailType: detailType, Source: Source, Account: account,
		Time: at.UTC().Format(TimeFormat), Region: region, Resources: []string{clusterARN}, Detail: b}, nil
}
