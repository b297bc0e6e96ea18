package controller

import "sync"

// queue is a work queue of cluster ids: an id waiting in it is held once however often it is
// added, and an id being worked on is not handed out again until Done, so one cluster is never
// reconciled by two workers at once (the contract of client-go's workqueue, in miniature).
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	order   []string
	waiting map[string]bool
	active  map[string]bool
	again   map[string]bool // added while active: requeue on Done
	closed  bool
}

func newQueue() *queue {
	q := &queue{waiting: map[string]bool{}, active: map[string]bool{}, again: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add schedules id for reconciliation.
func (q *queue) Add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed || q.waiting[id]:
	case q.active[id]:
		q.again[id] = true
	default:
		q.waiting[id] = true
		q.order = append(q.order, id)
		q.cond.Signal()
	}
}

// Get blocks until an id is ready and marks it active; ok is false once the queue is closed.
func (q *queue) Get() (id string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	id, q.order = q.order[0], q.order[1:]
	delete(q.waiting, id)
	q.active[id] = true
	return id, true
}

// Done ends the work on id, and queues it again if it was added meanwhile.
func (q *queue) Done(id string) {
	q.mu.Lock()
	delete(q.active, id)
	again := q.again[id]
	delete(q.again, id)
	q.mu.Unlock()
	if again {
		q.Add(id)
	}
}

// Close wakes every Get and makes them return false.
func (q *queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}
