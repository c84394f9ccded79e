package remote

import (
	"os"
	"strconv"
	"strings"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
)

// The MEMTIER_* variables the remote client reads (runtime/config lists
// them among the names it knows). Each applies only to an Options field
// left zero: a value set in code wins.
const (
	// EnvPartBytes sets Options.PartBytes: a byte size with an optional
	// K, M, G (or KiB, MiB, GiB) suffix, powers of 1024.
	EnvPartBytes = "MEMTIER_REMOTE_PART_BYTES"
	// EnvConcurrency sets Options.MaxConcurrency: 1 to 1024.
	EnvConcurrency = "MEMTIER_REMOTE_CONCURRENCY"
)

// applyEnv fills PartBytes and MaxConcurrency from EnvPartBytes and
// EnvConcurrency through o.Getenv (os.Getenv when nil) when they are zero.
// Errors: errs.Format naming the variable and its value, for a value that
// does not parse or lies outside the variable's range, as runtime/config
// reports every MEMTIER_* value (README "Configuration").
func (o *Options) applyEnv() error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	bad := func(name, v, why string) error {
		return errs.New(errs.Format, "remote options", "%s=%q: %s", name, v, why)
	}
	if v := strings.TrimSpace(getenv(EnvPartBytes)); v != "" && o.PartBytes == 0 {
		n, err := config.ParseSize(v)
		if err != nil || n < MinPartBytes || n > MaxPartBytes {
			return bad(EnvPartBytes, v, "want a byte size from 5M to 1G (K, M, G suffixes are powers of 1024)")
		}
		o.PartBytes = int64(n)
	}
	if v := strings.TrimSpace(getenv(EnvConcurrency)); v != "" && o.MaxConcurrency == 0 {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return bad(EnvConcurrency, v, "want 1 to 1024 GETs in flight")
		}
		o.MaxConcurrency = n
	}
	return nil
}
