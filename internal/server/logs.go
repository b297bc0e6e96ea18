package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
)

// LogsPath is hale's log endpoint. It is outside the SageMaker API (CloudWatch Logs holds
// HyperPod's logs), behind the same SigV4 authentication; a key needs sagemaker:DescribeCluster
// on the cluster. GET LogsPath?cluster=NAME lists the cluster's log streams;
// &stream=S&after=SEQ&limit=N returns a stream's events after a sequence number.
const LogsPath = "/hale/logs"

// LogStreamInfo is one stream in the listing.
type LogStreamInfo struct {
	LogGroupName       string
	LogStreamName      string
	CreationTime       api.Time
	LastEventTimestamp api.Time
}

// LogEventInfo is one event of a stream.
type LogEventInfo struct {
	Seq       int64
	Timestamp api.Time
	Message   string
}

// LogsAnswer is the endpoint's JSON answer.
type LogsAnswer struct {
	LogGroupName string
	LogStreams   []LogStreamInfo `json:",omitempty"`
	Events       []LogEventInfo  `json:",omitempty"`
	// NextSeq is the sequence number to pass as after for the next events.
	NextSeq int64 `json:",omitempty"`
}

func (h *Handler) serveLogs(w http.ResponseWriter, r *http.Request, st store.Store) {
	fail := func(err error) {
		e := api.AsError(err)
		h.writeError(w, e.HTTPStatus(), e)
	}
	key, err := h.cfg.Verifier.Verify(r, nil)
	if err != nil {
		fail(err)
		return
	}
	io.Copy(io.Discard, r.Body)
	q := r.URL.Query()
	ref := q.Get("cluster")
	if !auth.Allows(key, "sagemaker:DescribeCluster") || !auth.AllowsCluster(key, ref) {
		fail(auth.AccessDenied(key, "sagemaker:DescribeCluster", ref))
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	var ans LogsAnswer
	err = st.Read(r.Context(), func(tx store.Tx) error {
		c, err := tx.Cluster(ref)
		if errors.Is(err, store.ErrNotFound) {
			return api.Errorf(api.CodeResourceNotFound, "Cluster %s not found.", ref)
		}
		if err != nil {
			return err
		}
		if !auth.AllowsCluster(key, c.Name) {
			return auth.AccessDenied(key, "sagemaker:DescribeCluster", ref)
		}
		ans.LogGroupName = agentserver.LogGroup(c.Name, c.ID)
		if stream := q.Get("stream"); stream != "" {
			events, err := tx.LogEvents(ans.LogGroupName, stream, after, limit)
			if err != nil {
				return err
			}
			ans.NextSeq = after
			for _, e := range events {
				ans.Events = append(ans.Events, LogEventInfo{Seq: e.Seq, Timestamp: api.NewTime(e.Time), Message: e.Message})
				ans.NextSeq = e.Seq
			}
			return nil
		}
		streams, err := tx.LogStreams(ans.LogGroupName, q.Get("prefix"))
		for _, s := range streams {
			ans.LogStreams = append(ans.LogStreams, LogStreamInfo{LogGroupName: s.Group, LogStreamName: s.Name,
				CreationTime: api.NewTime(s.CreatedAt), LastEventTimestamp: api.NewTime(s.LastEventAt)})
		}
		return err
	})
	if err != nil {
		fail(err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ans)
}
