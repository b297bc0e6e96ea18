package eventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Sink is where a Deliverer hands events: one at a time, in order, each until it is taken.
type Sink interface {
	// Name identifies the sink's cursor in the store: the same for the same sink across restarts.
	Name() string
	// Deliver hands one event over; nil means the sink has it.
	Deliver(ctx context.Context, e store.OutboxEntry) error
}

// Resumer is a sink that can say which event it took last, for when it took one and the server
// stopped before recording that (the file sink: the event is in the file, the cursor not yet
// moved). The Deliverer moves the cursor past that event before delivering again.
type Resumer interface {
	// LastDelivered returns the id of the last event the sink holds ("" when none).
	LastDelivered() (string, error)
}

// IdempotencyKeyHeader is the header a webhook request carries the event's id in (the IETF
// httpapi draft "The Idempotency-Key HTTP Header Field"): the same at every retry of the event.
const IdempotencyKeyHeader = "Idempotency-Key"

// DefaultWebhookTimeout is how long one webhook request may take before it counts as failed.
const DefaultWebhookTimeout = 10 * time.Second

// Webhook POSTs each event, alone, as application/json to a URL. A 2xx answer is a delivery;
// any other answer or a network error is a failure (retried by the Deliverer).
type Webhook struct {
	URL    string
	Client *http.Client // default: DefaultWebhookTimeout per request
}

// Name is "webhook URL" (a password in the URL left out).
func (w *Webhook) Name() string {
	if u, err := url.Parse(w.URL); err == nil {
		return "webhook " + u.Redacted()
	}
	return "webhook " + w.URL
}

// Deliver POSTs e.
func (w *Webhook) Deliver(ctx context.Context, e store.OutboxEntry) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(e.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, e.ID)
	req.Header.Set("User-Agent", "hale-eventbridge")
	c := w.Client
	if c == nil {
		c = &http.Client{Timeout: DefaultWebhookTimeout}
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s: %s", w.Name(), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// File appends each event as one line of JSON (JSON lines) to a file, and syncs it to disk
// before the event counts as delivered. A reader following the file takes complete lines only:
// one write can reach a reader of another descriptor in parts.
type File struct {
	Path string

	mu sync.Mutex
	f  *os.File
}

// Name is "file ABSOLUTE-PATH".
func (s *File) Name() string {
	if abs, err := filepath.Abs(s.Path); err == nil {
		return "file " + abs
	}
	return "file " + s.Path
}

func (s *File) open() error {
	if s.f != nil {
		return nil
	}
	_, statErr := os.Stat(s.Path)
	f, err := os.OpenFile(s.Path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) { // a new file: its directory entry must survive a crash too
		if d, err := os.Open(filepath.Dir(s.Path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	s.f = f
	return nil
}

// Deliver appends e's line and syncs the file. A write that fails half-way is cut off again, so
// the file never holds half an event.
func (s *File) Deliver(_ context.Context, e store.OutboxEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(); err != nil {
		return err
	}
	fi, err := s.f.Stat()
	if err != nil {
		return err
	}
	line := append(append(make([]byte, 0, len(e.Body)+1), e.Body...), '\n')
	if _, err := s.f.Write(line); err != nil {
		s.f.Truncate(fi.Size())
		return err
	}
	if err := s.f.Sync(); err != nil {
		s.f.Truncate(fi.Size())
		return err
	}
	return nil
}

// CompleteLines splits what a reader read of a JSON-lines file that File appends to into its
// lines, without their newlines. A last line without its newline is left out: it is an event
// still being written (one write can reach a reader of another descriptor in parts), or half of
// one a crash left, which LastDelivered cuts off on the next start.
func CompleteLines(data []byte) [][]byte {
	var lines [][]byte
	for {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		if !complete {
			return lines
		}
		lines, data = append(lines, line), rest
	}
}

// LastDelivered reads the id of the file's last line. A last line without its newline (the
// server stopped mid-write) is cut off first: it was never delivered.
func (s *File) LastDelivered() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(); err != nil {
		return "", err
	}
	fi, err := s.f.Stat()
	if err != nil {
		return "", err
	}
	size := fi.Size()
	end, err := lastByte(s.f, size, '\n') // the end of the last complete line
	if err != nil {
		return "", err
	}
	if end+1 != size {
		if err := s.f.Truncate(end + 1); err != nil {
			return "", err
		}
		if err := s.f.Sync(); err != nil {
			return "", err
		}
	}
	if end < 0 {
		return "", nil
	}
	start, err := lastByte(s.f, end, '\n')
	if err != nil {
		return "", err
	}
	line := make([]byte, end-start-1)
	if _, err := s.f.ReadAt(line, start+1); err != nil {
		return "", err
	}
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return "", fmt.Errorf("%s: its last line is not an event: %w", s.Path, err)
	}
	return ev.ID, nil
}

// lastByte is the offset of the last b in f before offset before, -1 when there is none.
func lastByte(f *os.File, before int64, b byte) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := before; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, b); i >= 0 {
			return start + int64(i), nil
		}
		end = start
	}
	return -1, nil
}

// Close closes the file.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
