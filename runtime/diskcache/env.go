package diskcache

import (
	"fmt"
	"strings"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
)

// Environment variables that turn the disk cache on (runtime/config lists
// them among the MEMTIER_* names it knows).
const (
	// EnvDir names the cache directory; unset or empty: no disk cache.
	EnvDir = "MEMTIER_DISK_CACHE_DIR"
	// EnvBytes is the budget in bytes (K, M, G, T or KiB... suffixes,
	// powers of 1024); unset: DefaultBudgetBytes, capped at half the free
	// space (see DefaultBudgetBytes).
	EnvBytes = "MEMTIER_DISK_CACHE_BYTES"
	// EnvTrust is 0 to check every piece on every read (Options.NoTrust),
	// 1 (or unset) to serve pieces this process checked from trust.
	EnvTrust = "MEMTIER_DISK_CACHE_TRUST"
)

// OptionsFromEnv reads EnvDir, EnvBytes and EnvTrust through getenv. on
// is false when EnvDir is unset or empty (the disk cache is off). Errors:
// errs.InvalidArg naming the variable for a budget that is not a byte size
// or is 0, and for an EnvTrust other than 0 or 1.
func OptionsFromEnv(getenv func(string) string) (o Options, on bool, err error) {
	o.Dir = strings.TrimSpace(getenv(EnvDir))
	if o.Dir == "" {
		return o, false, nil
	}
	if v := getenv(EnvBytes); strings.TrimSpace(v) != "" {
		n, err := config.ParseSize(v)
		if err == nil && n == 0 {
			err = fmt.Errorf("0: want a positive budget (unset %s to turn the disk cache off)", EnvDir)
		}
		if err != nil {
			return o, false, errs.New(errs.InvalidArg, "disk cache", "%s=%q: %v", EnvBytes, v, err)
		}
		o.BudgetBytes = n
	}
	switch v := strings.TrimSpace(getenv(EnvTrust)); v {
	case "", "1":
	case "0":
		o.NoTrust = true
	default:
		return o, false, errs.New(errs.InvalidArg, "disk cache", "%s=%q: want 0 or 1", EnvTrust, v)
	}
	return o, true, nil
}
