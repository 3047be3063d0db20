// Command kubelet-server is the HTTPS side of one node of fluxhop's test
// cluster: the endpoints the API server calls on a kubelet for `kubectl
// logs` (/containerLogs) and `kubectl exec` (/exec, SPDY and WebSocket),
// and /healthz. The pods themselves are run by the Python kubelet in
// tests/realk8s/kubelet, which starts this server as its child and tells it
// about containers through files:
//
//	ROOT/<namespace>_<pod>/<container>/state.json
//
// holding {"id", "running", "pid", "env", "cwd", "uid", "gid", "log",
// "previousLog"}: the container's ID, whether it runs, the host PID of its
// process (exec enters that process's namespaces with nsenter), the
// environment and working directory exec gets, and its CRI-format log files
// (the format containerd writes, read here with the kubelet's own reader,
// k8s.io/cri-client/pkg/logs, so tailLines, sinceTime, limitBytes,
// timestamps and follow behave as on a real node).
//
// Not served: /attach, /portForward, /run, /stats, /metrics (fluxhop uses
// none of them). Clients must present a certificate signed by --client-ca
// (the API server's --kubelet-client-certificate); that is all the
// authorization there is, where a real kubelet also asks the API server
// with a SubjectAccessReview.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/cri-client/pkg/logs"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// containerState is what the Python kubelet writes for each container.
type containerState struct {
	ID          string   `json:"id"`
	Running     bool     `json:"running"`
	PID         int      `json:"pid"`
	Env         []string `json:"env"`
	Cwd         string   `json:"cwd"`
	UID         *int     `json:"uid"`
	GID         *int     `json:"gid"`
	Log         string   `json:"log"`
	PreviousLog string   `json:"previousLog"`
}

type server struct{ root string }

func (s *server) state(namespace, pod, container string) (*containerState, error) {
	path := filepath.Join(s.root, namespace+"_"+pod, container, "state.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st := &containerState{}
	return st, json.Unmarshal(data, st)
}

// splitPath takes /prefix/{namespace}/{pod}[/{uid}]/{container}, as the API
// server sends it, and returns namespace, pod and container.
func splitPath(path, prefix string) (string, string, string, bool) {
	parts := strings.Split(strings.TrimPrefix(path, prefix), "/")
	switch len(parts) {
	case 3:
		return parts[0], parts[1], parts[2], true
	case 4:
		return parts[0], parts[1], parts[3], true
	}
	return "", "", "", false
}

// waiting is the kubelet's answer for a container that has not started yet.
func waiting(w http.ResponseWriter, container, pod string) {
	http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, pod),
		http.StatusBadRequest)
}

// ---------------------------------------------------------------- logs

// statusOnly answers the one CRI call the kubelet's log reader makes, to
// know whether to keep following; every other RuntimeService method is
// unused (and would panic on the nil embedded interface).
type statusOnly struct {
	internalapi.RuntimeService
	server                    *server
	namespace, pod, container string
}

func (r statusOnly) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	state := runtimeapi.ContainerState_CONTAINER_EXITED
	if st, err := r.server.state(r.namespace, r.pod, r.container); err == nil && st.Running && st.ID == id {
		state = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: state}}, nil
}

// flushWriter sends each write to the client at once, as the kubelet's
// flushwriter does, so that a followed log streams.
type flushWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	fw.f.Flush()
	return n, err
}

func optionalInt(q map[string][]string, key string) (*int64, error) {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return nil, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	return &n, err
}

func logOptions(r *http.Request) (*logs.LogOptions, bool, string, error) {
	q := r.URL.Query()
	opts := &logs.LogOptions{}
	var err error
	if tail := q.Get("tail"); tail != "" && tail != "all" { // the kubelet's old spelling
		q.Set("tailLines", tail)
	}
	if opts.TailLines, err = optionalInt(q, "tailLines"); err != nil {
		return nil, false, "", err
	}
	if opts.LimitBytes, err = optionalInt(q, "limitBytes"); err != nil {
		return nil, false, "", err
	}
	since, err := optionalInt(q, "sinceSeconds")
	if err != nil {
		return nil, false, "", err
	}
	if since != nil {
		opts.Since = time.Now().Add(-time.Duration(*since) * time.Second)
	}
	if t := q.Get("sinceTime"); t != "" {
		at, err := time.Parse(time.RFC3339, t)
		if err != nil {
			return nil, false, "", err
		}
		if at.After(opts.Since) {
			opts.Since = at
		}
	}
	opts.Follow = q.Get("follow") == "true"
	opts.Timestamp = q.Get("timestamps") == "true"
	return opts, q.Get("previous") == "true", q.Get("stream"), nil
}

func (s *server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container, ok := splitPath(r.URL.Path, "/containerLogs/")
	if !ok {
		http.Error(w, "want /containerLogs/{namespace}/{pod}/{container}", http.StatusBadRequest)
		return
	}
	opts, previous, stream, err := logOptions(r)
	if err != nil {
		http.Error(w, `{"message": "Unable to decode query."}`, http.StatusBadRequest)
		return
	}
	st, err := s.state(ns, pod, container)
	if err != nil {
		waiting(w, container, pod)
		return
	}
	path, id := st.Log, st.ID
	if previous {
		if st.PreviousLog == "" {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod),
				http.StatusBadRequest)
			return
		}
		path, id = st.PreviousLog, ""
	}
	fw := flushWriter{w: w, f: w.(http.Flusher)}
	var stdout, stderr io.Writer = fw, fw
	switch stream {
	case "", "All":
	case "Stdout":
		stderr = nil
	case "Stderr":
		stdout = nil
	default:
		http.Error(w, fmt.Sprintf("invalid stream type %q", stream), http.StatusBadRequest)
		return
	}
	if !opts.Follow {
		id = "" // the reader asks for the container's state only to follow it
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	runtime := statusOnly{server: s, namespace: ns, pod: pod, container: container}
	if err := logs.ReadLogs(r.Context(), path, id, opts, runtime, stdout, stderr); err != nil {
		log.Printf("logs %s/%s/%s: %v", ns, pod, container, err)
	}
}

// ---------------------------------------------------------------- exec

type executor struct{ server *server }

// ptyPair opens a pseudo-terminal: golang.org/x/term has no openpty, and the
// three ioctls below are all that creack/pty would do on Linux.
func ptyPair() (*os.File, *os.File, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		master.Close()
		return nil, nil, e
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		master.Close()
		return nil, nil, e
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

func setSize(f *os.File, size remotecommand.TerminalSize) {
	ws := struct{ Row, Col, X, Y uint16 }{Row: size.Height, Col: size.Width}
	syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws)))
}

// command enters the container's namespaces (nsenter, from util-linux) and
// runs cmd there with the container's environment, user and working
// directory, as a runtime's exec does.
func command(st *containerState, cmd []string) *exec.Cmd {
	args := []string{"--target", strconv.Itoa(st.PID), "--mount", "--uts", "--ipc", "--net", "--pid"}
	if st.Cwd != "" {
		args = append(args, "--wd="+st.Cwd)
	}
	if st.GID != nil {
		args = append(args, "--setgid", strconv.Itoa(*st.GID))
	}
	if st.UID != nil {
		args = append(args, "--setuid", strconv.Itoa(*st.UID))
	}
	// env -i -- NAME=VALUE... CMD: the first word without "=" is the command.
	args = append(args, "--", "/usr/bin/env", "-i", "--")
	args = append(args, st.Env...)
	return exec.Command("nsenter", append(args, cmd...)...)
}

func (e executor) ExecInContainer(ctx context.Context, name, uid, container string, cmd []string,
	in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, pod, _ := strings.Cut(name, "/")
	st, err := e.server.state(ns, pod, container)
	if err != nil || !st.Running {
		return fmt.Errorf("container %s is not running", container)
	}
	c := command(st, cmd)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var master *os.File
	if tty {
		m, slave, err := ptyPair()
		if err != nil {
			return err
		}
		master = m
		defer master.Close()
		c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		go func() {
			for size := range resize {
				setSize(master, size)
			}
		}()
		err = c.Start()
		slave.Close()
		if err != nil {
			return err
		}
		if in != nil {
			go io.Copy(master, in)
		}
		copied := make(chan struct{})
		go func() { io.Copy(out, master); close(copied) }() // EIO once the last holder of the slave exits
		err = wait(ctx, c)
		<-copied
		return err
	}
	c.Stdout, c.Stderr = out, errOut
	if errOut == nil {
		c.Stderr = out
	}
	var stdin io.WriteCloser
	if in != nil {
		if stdin, err = c.StdinPipe(); err != nil {
			return err
		}
	}
	if err := c.Start(); err != nil {
		return err
	}
	if stdin != nil {
		go func() { io.Copy(stdin, in); stdin.Close() }()
	}
	return wait(ctx, c)
}

// wait ends the command when the client goes away (the whole process group:
// nsenter's child lives in the pod's PID namespace but in nsenter's group),
// and turns an exit status into the error remotecommand reports as the
// command's exit code, 128+N for a signal as container runtimes report it.
func wait(ctx context.Context, c *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code := exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return utilexec.CodeExitError{Err: err, Code: code}
	}
	return err
}

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	ns, pod, container, ok := splitPath(r.URL.Path, "/exec/")
	if !ok {
		http.Error(w, "want /exec/{namespace}/{pod}/{container}", http.StatusBadRequest)
		return
	}
	if _, err := s.state(ns, pod, container); err != nil {
		waiting(w, container, pod)
		return
	}
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	remotecommand.ServeExec(w, r, executor{server: s}, ns+"/"+pod, "", container, cmd, opts,
		4*time.Hour, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:10250", "address to serve on")
	cert := flag.String("tls-cert-file", "", "serving certificate")
	key := flag.String("tls-private-key-file", "", "serving key")
	clientCA := flag.String("client-ca-file", "", "CA that signs the API server's kubelet client certificate")
	root := flag.String("root", "", "directory where the Python kubelet describes its containers")
	flag.Parse()
	pem, err := os.ReadFile(*clientCA)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		log.Fatalf("%s: no certificate", *clientCA)
	}
	s := &server{root: *root}
	mux := http.NewServeMux()
	mux.HandleFunc("/containerLogs/", s.containerLogs)
	mux.HandleFunc("/exec/", s.exec)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	srv := &http.Server{
		Addr:      *listen,
		Handler:   mux,
		TLSConfig: &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		// HTTP/2 cannot carry the SPDY upgrade exec needs, as on a real kubelet.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	log.Fatal(srv.ListenAndServeTLS(*cert, *key))
}
