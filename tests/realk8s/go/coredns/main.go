// Command coredns is the cluster DNS of fluxhop's test cluster: upstream
// CoreDNS with only the plugins a test cluster's Corefile uses, so that its
// build does not compile the cloud providers' SDKs of the full plugin set.
// Its own module, because CoreDNS pins newer Kubernetes and etcd client
// libraries than the control plane in ../kubernetes is built from.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugins the test cluster's Corefile names; each registers itself.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
