package s3test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SelfCPU is this process's user and system CPU time so far (every
// goroutine's), 0 when getrusage fails: the client side of a benchmark's
// CPU seconds per GB.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcCPU is process pid's user and system CPU time so far (/proc/PID/stat
// fields 14 and 15, in clock ticks of 10 ms), 0 when it cannot be read: the
// server side (Gateway.Pid).
func ProcCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// EnvInts parses the comma-separated positive integers of the environment
// variable name (a benchmark's sizes, concurrencies or rounds), or returns
// def when it is unset or any item is not a positive integer.
func EnvInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return def
		}
		out = append(out, n)
	}
	return out
}
