// Command k8s is the control plane of fluxhop's test cluster as one
// multi-call binary: the first argument names the component, the rest are
// that component's own flags, exactly as its upstream command takes them.
//
//	k8s etcd --data-dir ... --listen-client-urls ...
//	k8s kube-apiserver --etcd-servers ... --secure-port ...
//	k8s kube-controller-manager --kubeconfig ... --controllers ...
//	k8s kube-scheduler --kubeconfig ...
//	k8s kubectl get pods       (or through a link named kubectl)
//
// One process per component, never several in one process: upstream keeps
// process-global state (the component-globals registry, the signal
// context) that may be set only once. One binary still means one link and
// one copy of the shared code on disk. Nothing here changes what the
// components do: each branch is the body of upstream's own main().
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // upstream's kube-apiserver and KCM carry it, for CronJob time zones

	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's auth plugins, as upstream's main has them
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

const usage = "usage: k8s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl [FLAGS...]"

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		os.Args = append([]string{"k8s", "kubectl"}, os.Args[1:]...)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	// The component sees itself as argv[0], as it would as its own binary.
	os.Args = os.Args[1:]
	switch os.Args[0] {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream's main
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "k8s: unknown component %q\n%s\n", os.Args[0], usage)
		os.Exit(2)
	}
}
