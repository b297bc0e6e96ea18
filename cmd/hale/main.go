// Command hale is hale's one binary: the server (hale server), the access-key tool
// (hale access-key) and one CLI verb per SageMaker cluster operation, spelled as the AWS CLI
// spells them (hale create-cluster, hale list-cluster-nodes, ...).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitCode(err))
	}
}
