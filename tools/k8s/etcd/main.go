// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3/etcdmain), whose main
// package is a library: this is its four-line main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
