package diskcache

import (
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	k, err := NewKey("https://h/p?x=secret", "etag:\"abc\"", 12345)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(k.display, "secret") || !strings.HasPrefix(k.display, "https://h/p?sha256=") {
		t.Fatalf("display %q", k.display)
	}
	b := encodeHeader(&k, 8192, 4000, []uint32{0xdeadbeef})
	if len(b) != headerAlign {
		t.Fatalf("header %d bytes, want %d", len(b), headerAlign)
	}
	h, err := decodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.off != 8192 || h.payloadLen != 4000 || len(h.crcs) != 1 || h.crcs[0] != 0xdeadbeef || h.pieceLen != pieceBytes || h.objSize != 12345 ||
		h.id != k.display || h.val != k.Validator || h.hdrLen != headerAlign {
		t.Fatalf("decoded %+v", h)
	}
	if why := h.mismatch(&k, 8192, 4000); why != "" {
		t.Fatal(why)
	}
	if why := h.mismatch(&k, 0, 4000); why == "" {
		t.Fatal("offset mismatch not seen")
	}
	k2, _ := NewKey("https://h/p?x=secret", "etag:\"abd\"", 12345)
	if why := h.mismatch(&k2, 8192, 4000); why != "another version's entry" {
		t.Fatalf("validator mismatch: %q", why)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		if _, err := decodeHeader(c); err == nil {
			t.Fatalf("flipped bit in header byte %d not detected", i)
		}
	}
	// A long identity takes a longer, still aligned, header.
	long, _ := NewKey("s3://b/"+strings.Repeat("k", 5000), "lm:x", 1)
	if n := headerLen(&long, 1); n != 2*headerAlign {
		t.Fatalf("long header %d bytes", n)
	}
	if _, err := decodeHeader(encodeHeader(&long, 0, 1, []uint32{0})); err != nil {
		t.Fatal(err)
	}
	// The piece table: one CRC per started piece; a MaxBlockBytes entry's
	// table (4 KiB) takes a second header page even with a short key.
	for _, c := range []struct{ payload, pieces, hdr int }{
		{0, 0, headerAlign}, {1, 1, headerAlign}, {pieceBytes, 1, headerAlign}, {pieceBytes + 1, 2, headerAlign},
		{DefaultBlockBytes, 64, headerAlign}, {MaxBlockBytes, 1024, 2 * headerAlign},
	} {
		if n := numPieces(c.payload); n != c.pieces {
			t.Fatalf("%d bytes: %d pieces, want %d", c.payload, n, c.pieces)
		}
		if n := headerLen(&k, c.payload); n != c.hdr {
			t.Fatalf("%d bytes: header %d bytes, want %d", c.payload, n, c.hdr)
		}
		crcs := make([]uint32, c.pieces)
		for i := range crcs {
			crcs[i] = uint32(i)*2654435761 + 1
		}
		h, err := decodeHeader(encodeHeader(&k, 0, c.payload, crcs))
		if err != nil || h.payloadLen != uint32(c.payload) || len(h.crcs) != c.pieces || h.id != k.display || h.val != k.Validator {
			t.Fatalf("%d bytes: %+v %v", c.payload, h, err)
		}
		for i := range crcs {
			if h.crcs[i] != crcs[i] {
				t.Fatalf("%d bytes: piece %d crc %08x, want %08x", c.payload, i, h.crcs[i], crcs[i])
			}
		}
	}
	if _, err := NewKey("s3://b/"+strings.Repeat("k", maxTextBytes), "lm:x", 1); err == nil {
		t.Fatal("an identity over the limit was accepted")
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if _, on, err := OptionsFromEnv(env(nil)); on || err != nil {
		t.Fatalf("unset: on %v err %v", on, err)
	}
	o, on, err := OptionsFromEnv(env(map[string]string{EnvDir: "/d", EnvBytes: "3GiB"}))
	if !on || err != nil || o.Dir != "/d" || o.BudgetBytes != 3<<30 {
		t.Fatalf("%+v %v %v", o, on, err)
	}
	o, _, _ = OptionsFromEnv(env(map[string]string{EnvDir: "/d", EnvBytes: "512m"}))
	if o.BudgetBytes != 512<<20 {
		t.Fatalf("512m: %d", o.BudgetBytes)
	}
	o, _, _ = OptionsFromEnv(env(map[string]string{EnvDir: "/d"}))
	if o.BudgetBytes != 0 {
		t.Fatalf("default budget field %d, want 0 (Open picks it)", o.BudgetBytes)
	}
	if o.NoTrust {
		t.Fatal("trust off without " + EnvTrust)
	}
	for v, no := range map[string]bool{"0": true, "1": false, " 0 ": true} {
		o, _, err = OptionsFromEnv(env(map[string]string{EnvDir: "/d", EnvTrust: v}))
		if err != nil || o.NoTrust != no {
			t.Fatalf("%s=%q: NoTrust %v err %v, want %v", EnvTrust, v, o.NoTrust, err, no)
		}
	}
	if _, _, err := OptionsFromEnv(env(map[string]string{EnvDir: "/d", EnvTrust: "yes"})); err == nil ||
		!strings.Contains(err.Error(), EnvTrust) {
		t.Fatalf("%s=yes: %v, want an error naming it", EnvTrust, err)
	}
	for _, bad := range []string{"10GB", "0", "-1", "lots", "99999999999T"} {
		if _, _, err := OptionsFromEnv(env(map[string]string{EnvDir: "/d", EnvBytes: bad})); err == nil ||
			!strings.Contains(err.Error(), EnvBytes) {
			t.Fatalf("%s=%q: %v, want an error naming it", EnvBytes, bad, err)
		}
	}
}
