package main

import (
	"path/filepath"
	"testing"

	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/pflag"
)

// A server on a shared store keeps its nodes' records in --provider-dir: server.json remembers
// it, a restart without the flag takes it back, and the commands that reach nodes themselves
// (hale exec, debug, down) look there, not in DATA_DIR/local (a new user's trial: hale exec
// found no node on such a server).
func TestProviderDirIsRemembered(t *testing.T) {
	dataDir, shared := t.TempDir(), t.TempDir()
	if got, want := providerRoot(dataDir, "local"), filepath.Join(dataDir, "local"); got != want {
		t.Fatalf("without server.json: %s, want %s", got, want)
	}
	rememberSettings(server.Options{DataDir: dataDir, Provider: "local", ProviderDir: shared}, filepath.Join(dataDir, "s3"))
	if got := providerRoot(dataDir, "local"); got != shared {
		t.Fatalf("providerRoot: %s, want the remembered --provider-dir %s", got, shared)
	}
	f := pflag.NewFlagSet("server", pflag.ContinueOnError)
	o := server.Options{DataDir: dataDir}
	addProviderFlags(f, &o)
	recallSettings(f, &o)
	if o.ProviderDir != shared {
		t.Fatalf("a restart without --provider-dir: %q, want %s", o.ProviderDir, shared)
	}
}
