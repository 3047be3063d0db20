// Command gpu-plugin advertises fake GPUs to its node's kubelet through the
// kubelet's device-plugin API (v1beta1), so that a pod's nvidia.com/gpu
// request goes through the real device manager: capacity, the scheduler's
// fit, the kubelet's allocation and what that puts in the container.
//
// The gRPC server, the registration and the re-registration when the
// kubelet restarts are upstream's (the Stub of the kubelet's own tests,
// k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1). What this
// adds is what a GPU plugin gives the container it allocates to: NVIDIA's
// device plugin (its "envvar" list strategy) sets NVIDIA_VISIBLE_DEVICES to
// the IDs of the devices allocated, and nothing probes real hardware.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

// visibleDevices is the variable NVIDIA's container toolkit reads.
const visibleDevices = "NVIDIA_VISIBLE_DEVICES"

func allocate(r *pluginapi.AllocateRequest, devs map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	var out pluginapi.AllocateResponse
	for _, req := range r.ContainerRequests {
		for _, id := range req.DevicesIds {
			dev, ok := devs[id]
			if !ok || dev.Health != pluginapi.Healthy {
				return nil, fmt.Errorf("no healthy device %q", id)
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{visibleDevices: strings.Join(req.DevicesIds, ",")},
		})
	}
	return &out, nil
}

func main() {
	resource := flag.String("resource", "nvidia.com/gpu", "the extended resource advertised")
	count := flag.Int("count", 2, "how many devices")
	node := flag.String("node", "node", "the node's name, in the devices' IDs")
	flag.Parse()

	ctx := context.Background()
	logger := klog.FromContext(ctx)
	devs := make([]*pluginapi.Device, *count)
	for i := range devs {
		devs[i] = &pluginapi.Device{ID: fmt.Sprintf("GPU-%s-%d", *node, i), Health: pluginapi.Healthy}
	}
	// The kubelet empties its plugins' directory as it starts, then listens:
	// a plugin comes after (and again after each restart: the Stub's Watch).
	for {
		if _, err := os.Stat(pluginapi.KubeletSocket); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	socket := pluginapi.DevicePluginPath + "fhk8s-gpu.sock"
	stub := plugin.NewDevicePluginStub(logger, devs, socket, *resource, false, false)
	stub.SetAllocFunc(allocate)
	if err := stub.Start(ctx); err != nil {
		logger.Error(err, "starting the plugin's server")
		os.Exit(1)
	}
	if err := stub.Register(ctx, pluginapi.KubeletSocket, *resource, pluginapi.DevicePluginPath); err != nil {
		logger.Error(err, "registering with the kubelet")
		os.Exit(1)
	}
	go stub.Watch(ctx, pluginapi.KubeletSocket, *resource, pluginapi.DevicePluginPath)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	if err := stub.Stop(logger); err != nil {
		logger.Error(err, "stopping")
	}
}
