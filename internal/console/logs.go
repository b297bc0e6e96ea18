package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/store"
)

// logsAnswer is a cluster's log streams, or a stream's lines after a sequence number.
type logsAnswer struct {
	LogGroup string
	Streams  []logStreamRow `json:",omitempty"`
	Lines    []logLine      `json:",omitempty"`
	NextSeq  int64
}

type logStreamRow struct {
	Name      string
	LastEvent time.Time
}

type logLine struct {
	Seq     int64
	Time    time.Time
	Message string
}

// serveLogs answers a cluster's log streams, or with ?stream= that stream's lines after
// ?after= (what /hale/logs serves, with the same right: sagemaker:DescribeCluster).
func (c *Console) serveLogs(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "DescribeCluster", name); err != nil {
		writeAPIError(w, err)
		return
	}
	q := r.URL.Query()
	stream := q.Get("stream")
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	var ans logsAnswer
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, name)
		if err != nil {
			return err
		}
		ans.LogGroup = agentserver.LogGroup(cl.Name, cl.ID)
		if stream == "" {
			ss, err := tx.LogStreams(ans.LogGroup, "")
			for _, s := range ss {
				ans.Streams = append(ans.Streams, logStreamRow{Name: s.Name, LastEvent: s.LastEventAt})
			}
			return err
		}
		evs, err := tx.LogEvents(ans.LogGroup, stream, after, 1000)
		ans.NextSeq = after
		for _, e := range evs {
			ans.Lines = append(ans.Lines, logLine{Seq: e.Seq, Time: e.Time, Message: e.Message})
			ans.NextSeq = e.Seq
		}
		return err
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
