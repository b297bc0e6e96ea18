package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/awscli"
	"github.com/haleproject/hale/internal/store"
)

// After InService, hale up keeps the terminal it runs in useful: it prints the cluster's events
// as they are recorded (scaling, replacements, faults found, drains, repairs, resumed jobs,
// statuses), one line each, until Ctrl-C or until the cluster is deleted.

const (
	// followEvery is how often hale up looks for new events.
	followEvery = 500 * time.Millisecond
	// followWindow is how far back in time each look reaches: an event carries the time its
	// reconcile began, so it may be committed a little after later-stamped ones. Events are
	// told apart by their store sequence, which follows commit order.
	followWindow = time.Minute
	// followWidth is the line width when the output is not a terminal (a log file): wide
	// enough for a finding's evidence or a repair's first steps, which a terminal's width cuts.
	followWidth = 400
)

// lastEventSeq is the store sequence of the cluster's newest event (0 when it has none or is
// gone): events after it are new.
func lastEventSeq(ctx context.Context, st store.Store, name string) int64 {
	var last int64
	st.Read(ctx, func(tx store.Tx) error {
		cl, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: cl.ID, Order: store.Descending, Limit: 100})
		for _, e := range evs {
			last = max(last, e.Seq)
		}
		return err
	})
	return last
}

// follow prints each event of the cluster recorded after the event with sequence after, once,
// in the order they were recorded, until ctx ends or the cluster is gone.
func follow(ctx context.Context, out io.Writer, st store.Store, name string, after int64) {
	width := followWidth
	if f, ok := out.(*os.File); ok {
		if w := awscli.TerminalWidth(f); w > 0 {
			width = w
		}
	}
	since := time.Now() // the newest printed event's time
	for {
		var fresh []*store.Event
		every := followEvery
		err := st.Read(ctx, func(tx store.Tx) error {
			cl, err := tx.Cluster(name)
			if err != nil {
				return err
			}
			if cl.Status == api.ClusterStatusDeleting {
				// Its events go with it (ON DELETE CASCADE) the moment its last node is gone:
				// look often, so the terminations are printed before that.
				every = followEvery / 10
			}
			q := store.EventQuery{ClusterID: cl.ID, Order: store.Ascending, TimeAfter: new(since.Add(-followWindow)), Limit: 500}
			for {
				page, err := tx.ListEvents(q)
				if err != nil {
					return err
				}
				for _, e := range page {
					if e.Seq > after {
						fresh = append(fresh, e)
					}
				}
				if len(page) < q.Limit {
					return nil
				}
				last := page[len(page)-1]
				q.After = &store.EventCursor{Time: last.Time, Seq: last.Seq}
			}
		})
		if errors.Is(err, store.ErrNotFound) {
			return // deleted (hale down)
		}
		slices.SortFunc(fresh, func(a, b *store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, e := range fresh {
			fmt.Fprintln(out, eventLine(e, width))
			after = e.Seq
			if e.Time.After(since) {
				since = e.Time
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// eventLine is one event on one line of at most width columns: its time, its level when it is
// not Info, and its description with runs of white space (a script's output, a timeline) made
// single spaces, cut at a word with "…" when too long (ListClusterEvents has it whole).
func eventLine(e *store.Event, width int) string {
	prefix := e.Time.Local().Format("15:04:05.000") + " "
	if e.Level != "" && e.Level != api.ClusterEventLevelInfo {
		prefix += strings.ToUpper(string(e.Level)) + ": "
	}
	text := strings.Join(strings.Fields(e.Description), " ")
	room := max(width-len([]rune(prefix)), 20)
	if runes := []rune(text); len(runes) > room {
		cut := string(runes[:room-1])
		if i := strings.LastIndex(cut, " "); i > len(cut)/2 {
			cut = cut[:i]
		}
		text = strings.TrimRight(cut, " ,;:(") + "…"
	}
	return prefix + text
}
