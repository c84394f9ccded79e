package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsEveryVariable keeps the README's environment table in step
// with Vars: every variable must have a row.
func TestReadmeListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("README.md not found next to the module")
	}
	for _, v := range Vars {
		if !strings.Contains(string(b), "| `"+v.Name+"`") {
			t.Errorf("README.md has no table row for %s", v.Name)
		}
	}
}

func TestFromEnv_StrictParsing(t *testing.T) {
	env := map[string]string{"MEMTIER_CACHE_BYTES": "8M", "MEMTIER_IO_THREADS": "3", "MEMTIER_DIRECT": "required"}
	o := Defaults()
	if err := o.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if o.CacheBytes != 8<<20 || o.IOThreads != 3 || o.DirectMode != DirectRequired {
		t.Fatalf("env not applied: %+v", o)
	}
	for k, bad := range map[string]string{"MEMTIER_CACHE_BYTES": "lots", "MEMTIER_IO_THREADS": "0",
		"MEMTIER_DIRECT": "maybe", "MEMTIER_FAULT": "eintr_every=x", "MEMTIER_CACHE_BLOCK_BYTES": "99999999999999999999G"} {
		o := Defaults()
		err := o.FromEnv(func(n string) (string, bool) { return bad, n == k })
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err = %v, want a Format error naming the variable", k, bad, err)
		}
	}
	o = Defaults()
	o.FromEnv(func(n string) (string, bool) { return "0", n == "MEMTIER_CACHE_BYTES" })
	if o.CacheEnabled {
		t.Fatal("MEMTIER_CACHE_BYTES=0 must turn the cache off")
	}
}

func TestValidate_Defaults(t *testing.T) {
	o := Defaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.CacheBlockBytes = 3000
	if o.Validate() == nil {
		t.Fatal("non power-of-two block accepted")
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{"1G", "64k", "0", "", "eintr_every=3,short_max=4095", "auto", "-1", "18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, vr := range Vars {
			o := Defaults()
			_ = o.FromEnv(func(n string) (string, bool) { return v, n == vr.Name })
		}
		_, _ = ParseFault(v)
	})
}
