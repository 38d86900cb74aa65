// terraform-provider-fixture: a small provider for the project's tests and benches, served to
// terraform and tofu through a provider network mirror on 127.0.0.1
// (test/support/provider-mirror.ts), so that init, the plugin cache and provider downloads
// are real without a registry. Its resources hold values or write files; its data source
// sleeps for a given time, so a bench controls how long a plan or apply runs.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// version is stamped at build time (-X main.version=...); the mirror names the release.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run in debug mode (for a debugger, as terraform's TF_REATTACH_PROVIDERS expects)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), newProvider(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/atlantis-operator/fixture",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
