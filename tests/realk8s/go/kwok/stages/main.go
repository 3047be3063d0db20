// Command stages prints the Stages kwok's own clusters start with (kwokctl's
// defaults, embedded in kwok's module): a node made Ready and kept so by
// Lease heartbeats, a pod made Running with its init containers Completed,
// and a deleted pod removed. Not pod-complete: the test cluster's marked
// pods run until they are deleted, as a Flux broker does.
//
// kwok itself reads Stages only from --config files; this prints them so
// that the tests pass kwok its defaults rather than a copy of them.
package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodDelete,
	}
	for i, stage := range stages {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Println(strings.TrimSpace(stage))
	}
}
