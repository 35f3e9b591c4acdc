//go:build ignore

// This file replaces gocaves' own main.go when scripts/install-tools.sh builds gocaves (the
// build drops the line above). It starts the mock as gocaves' mock-only mode does (the only
// mode Sluice uses) and prints the same {"connstr": ...} line, and then discards the mock's
// log: gocaves logs every KV packet it receives and sends, the packet formatted with %+v, in
// the mock's own goroutines; on the tests' load that formatting took about a quarter of the
// mock's CPU and tens of megabytes of output that devstack then had to cap. Set
// GOCAVES_PACKET_LOG=1 in the environment that starts the stack to keep the log.
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"os"

	"github.com/couchbaselabs/gocaves/mock/mockimpl"
)

func main() {
	// Accepted for the command lines of gocaves' own main; mock-only is the only mode here.
	flag.Bool("mock-only", true, "start the mock only (the only mode of this build)")
	flag.Parse()
	log.SetPrefix("GOCAVES ")
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetOutput(os.Stderr)

	cluster, err := mockimpl.NewDefaultCluster()
	if err != nil {
		log.Fatalf("Failed to start mock cluster: %s", err)
	}
	line, err := json.Marshal(struct {
		ConnStr string `json:"connstr"`
	}{cluster.ConnectionString()})
	if err != nil {
		log.Fatalf("Failed to print the connection string: %s", err)
	}
	if _, err := os.Stderr.Write(append(line, '\n')); err != nil {
		log.Fatalf("Failed to print the connection string: %s", err)
	}
	if os.Getenv("GOCAVES_PACKET_LOG") != "1" {
		// log skips formatting altogether when its output is io.Discard.
		log.SetOutput(io.Discard)
	}
	select {}
}
