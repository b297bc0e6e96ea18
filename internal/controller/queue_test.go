package controller

import (
	"testing"
	"time"
)

func TestQueueDeduplicatesAndRequeuesActive(t *testing.T) {
	q := newQueue()
	q.Add("a")
	q.Add("b")
	q.Add("a") // already waiting: held once
	id, _ := q.Get()
	if id != "a" {
		t.Fatalf("got %s, want a", id)
	}
	q.Add("a") // active: comes back after Done, not before
	id, _ = q.Get()
	if id != "b" {
		t.Fatalf("got %s, want b", id)
	}
	got := make(chan string)
	go func() {
		id, _ := q.Get()
		got <- id
	}()
	select {
	case id := <-got:
		t.Fatalf("got %s while a was still active", id)
	case <-time.After(50 * time.Millisecond):
	}
	q.Done("a")
	if id := <-got; id != "a" {
		t.Fatalf("got %s, want a again", id)
	}
	q.Close()
	if _, ok := q.Get(); ok {
		t.Fatal("Get after Close")
	}
}
