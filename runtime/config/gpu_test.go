package config

import (
	"strings"
	"testing"
)

func TestFromEnv_GPUVariables(t *testing.T) {
	env := map[string]string{"MEMTIER_GDS_MODE": "required", "MEMTIER_HBM_CACHE_BYTES": "256M",
		"MEMTIER_HBM_DEVICE": "1", "MEMTIER_PREFETCH_TO_HBM": "1", "MEMTIER_GDS_THRESHOLD": "4M"}
	o := Defaults()
	if o.HBMCacheBytes != 1<<30 || o.GDSMode != GDSAuto || o.HBMDevice != 0 || o.PrefetchToHBM {
		t.Fatalf("GPU defaults: %+v", o)
	}
	if err := o.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if o.GDSMode != GDSRequired || o.HBMCacheBytes != 256<<20 || o.HBMDevice != 1 || !o.PrefetchToHBM || o.GDSThreshold != 4<<20 {
		t.Fatalf("env not applied: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for k, bad := range map[string]string{"MEMTIER_GDS_MODE": "sometimes", "MEMTIER_HBM_DEVICE": "64",
		"MEMTIER_HBM_CACHE_BYTES": "big", "MEMTIER_PREFETCH_TO_HBM": "maybe"} {
		o := Defaults()
		if err := o.FromEnv(func(n string) (string, bool) { return bad, n == k }); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err = %v, want a Format error naming it", k, bad, err)
		}
	}
	o = Defaults()
	o.FromEnv(func(n string) (string, bool) { return "0", n == "MEMTIER_HBM_CACHE_BYTES" })
	if o.HBMCacheBytes != 0 || o.Validate() != nil {
		t.Fatalf("MEMTIER_HBM_CACHE_BYTES=0 must turn the HBM tier off: %+v", o)
	}
	for _, mod := range []func(*Options){
		func(o *Options) { o.GDSMode = 3 },
		func(o *Options) { o.HBMDevice = -1 },
		func(o *Options) { o.HBMCacheBytes = 1 << 20 },
	} {
		o := Defaults()
		mod(&o)
		if o.Validate() == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}
