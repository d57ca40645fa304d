//go:build linux

package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Proc is a process the Net started inside a namespace.
type Proc struct {
	Name string
	// Log is the file its standard output and error go to.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
	err  error
}

// Start runs argv inside namespace ns (`ip netns exec ns argv...`, which
// execs argv, so the process's PID is argv's) with env added to this
// process's environment, its output in Dir()/name.log. The process gets
// SIGKILL if the lab process dies first, and Close stops it.
func (n *Net) Start(ns, name string, argv []string, env ...string) (*Proc, error) {
	logPath := filepath.Join(n.dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netlab: starting %s in %s: %w", name, ns, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p, nil
}

// PID is the process's ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL (a crash: nothing is closed cleanly by the process
// itself) and waits for the exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL, and waits for the
// exit.
func (p *Proc) Stop(grace time.Duration) {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Kill()
		}
	})
	<-p.done
}
