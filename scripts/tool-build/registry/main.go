// Command registry serves go-containerregistry's OCI registry (pkg/registry, the one behind
// `crane registry serve`) over HTTPS on loopback, for the test suite: the release script pushes
// to it, and the test node's containerd pulls from it as the mirror of ghcr.io. HTTPS, because
// helm and containerd then talk to it exactly as to a real registry (no --plain-http), trusting
// the test's CA through SSL_CERT_FILE and hosts.toml.
//
// Blobs are kept under --disk, manifests in memory: a registry lives as long as one test binary.
// The first line on stdout is "listening on https://ADDRESS" once it accepts connections.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	cert := flag.String("tls-cert", "", "PEM certificate of the server (required)")
	key := flag.String("tls-key", "", "PEM private key of the server (required)")
	disk := flag.String("disk", "", "directory for the blobs (required)")
	flag.Parse()
	if *cert == "" || *key == "" || *disk == "" {
		log.Fatal("registry: --tls-cert, --tls-key and --disk are required")
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatalf("registry: failed to listen on %s: %v", *address, err)
	}
	server := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(*disk))),
		// HTTP/1.1 only. pkg/registry holds one lock while it reads an upload's body; over
		// HTTP/2, crane's concurrent uploads share one connection, and a second upload's unread
		// data can fill the connection's flow-control window while the first waits for more:
		// a push of two layers hung for good. (`crane registry serve` is plain HTTP/1.1.)
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	fmt.Printf("listening on https://%s\n", listener.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- server.ServeTLS(listener, *cert, *key) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = server.Shutdown(shutdown)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("registry: %v", err)
	}
}
