// The OCI registry the tests serve on loopback (main.go); built by scripts/install-go-tools.sh.
module reload-injector.test/registry

go 1.25.0

require github.com/google/go-containerregistry v0.22.1
