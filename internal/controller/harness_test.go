package controller_test

import (
	"testing"

	"github.com/haleproject/hale/internal/harness"
)

// rig is the controller tests' harness (internal/harness), with the helpers only these tests
// need as its methods.
type rig struct{ *harness.Harness }

func newHarness(t testing.TB) *rig { return &rig{harness.New(t)} }
