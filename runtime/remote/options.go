package remote

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/memtier/memtier/runtime/errs"
)

// Defaults and bounds of Options, in bytes, counts and durations.
const (
	DefaultPartBytes = 8 << 20 // parts of a read, as s3torchconnector and Run:ai use
	MinPartBytes     = 5 << 20 // S3's multipart minimum, and Run:ai's floor for object stores
	MaxPartBytes     = 1 << 30
	DefaultOpenBytes = 64 << 10 // bytes Open fetches and keeps (see Options.OpenBytes)
	MaxOpenBytes     = MaxPartBytes
	// DefaultMaxConcurrency: KvikIO is best at ~128 ranged GETs in flight
	// per 100 Gbps node (https://github.com/rapidsai/kvikio/pull/978) and
	// the AWS CRT sizes its connections from a throughput target; on versitygw over loopback every setting from 2
	// to 64 is within the noise (BenchmarkVersitygwSweep), so the default
	// is sized for real object stores.
	DefaultMaxConcurrency = 64
	DefaultMaxAttempts    = 6
	DefaultRetryBudget    = 60 * time.Second
	DefaultBackoffBase    = 100 * time.Millisecond
	DefaultBackoffMax     = 5 * time.Second
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultStallTimeout   = 30 * time.Second
	DefaultRegion         = "us-east-1"
)

// Options configures a Client. The zero value is valid: every field left
// zero takes the default its comment names (EnsureDefaults), and the
// endpoint, region and credentials come from the AWS_* environment and
// shared files, as the AWS CLI reads them.
type Options struct {
	// Endpoint is the S3 endpoint URL (http or https, optionally with a path
	// prefix), addressed path-style: Endpoint/bucket/key. Default:
	// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the profile's
	// endpoint_url, else https://s3.<Region>.amazonaws.com.
	Endpoint string
	// Region signs requests. Default: AWS_REGION, else AWS_DEFAULT_REGION,
	// else the profile's region, else us-east-1.
	Region string
	// Credentials, when not nil, are used as given (nothing is read from the
	// environment or files). Ignored when Anonymous.
	Credentials *Credentials
	// Profile names the shared-file profile. Default: AWS_PROFILE, else
	// "default". Files: AWS_SHARED_CREDENTIALS_FILE (default
	// ~/.aws/credentials) and AWS_CONFIG_FILE (default ~/.aws/config).
	Profile string
	// Anonymous sends s3:// requests unsigned (public buckets).
	Anonymous bool

	// PartBytes is the size of one ranged GET, in bytes. Default:
	// MEMTIER_REMOTE_PART_BYTES, else 8 MiB; MinPartBytes (5 MiB) to
	// MaxPartBytes (1 GiB).
	PartBytes int64
	// OpenBytes is how much of the object's start Open fetches, in bytes
	// (the one GET that also gives the size and ETag); the Object keeps
	// those bytes while it is held, so a following header read (safetensors,
	// tar) costs no second round trip. Default 64 KiB; -1 fetches one byte.
	// At most MaxOpenBytes.
	OpenBytes int64
	// MaxConcurrency caps the GETs in flight for this Client (and the
	// connections kept alive to each host). Default:
	// MEMTIER_REMOTE_CONCURRENCY, else 64; 1 to 1024.
	MaxConcurrency int
	// MaxAttempts bounds the tries of one part, the first included.
	// Default 6; 1 (no retry) to 100.
	MaxAttempts int
	// RetryBudget bounds the time one part may spend retrying, from its
	// first attempt: no retry starts that would wait past it. Default 60 s.
	RetryBudget time.Duration
	// BackoffBase and BackoffMax shape the wait before retry n (from 1):
	// uniform in [0, min(BackoffMax, BackoffBase*2^(n-1))) ("full jitter"),
	// or the server's Retry-After when that is longer. Defaults 100 ms, 5 s.
	BackoffBase, BackoffMax time.Duration
	// HeaderTimeout bounds the wait for a response's headers; StallTimeout
	// bounds a wait for the next body bytes. Either expiring is retried.
	// Defaults 30 s each.
	HeaderTimeout, StallTimeout time.Duration

	// Transport, when not nil, replaces the Client's own pooled
	// *http.Transport (tests, proxies). MaxConcurrency still caps requests.
	Transport http.RoundTripper
	// Getenv reads the environment; nil means os.Getenv. The library sets
	// it to libc's getenv (a c-shared library's os.Getenv sees the
	// environment as of exec, not what Python set later); tests set it to
	// keep the process environment out.
	Getenv func(string) string
}

// EnsureDefaults fills every zero field of o with its default (not the
// environment: NewClient resolves that) and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.PartBytes == 0 {
		o.PartBytes = DefaultPartBytes
	}
	if o.OpenBytes == 0 {
		o.OpenBytes = DefaultOpenBytes
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBudget == 0 {
		o.RetryBudget = DefaultRetryBudget
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.HeaderTimeout == 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}

// Validate checks o after EnsureDefaults: every field in its range, an
// Endpoint that is an http(s) URL without query or credentials. Errors are
// errs.InvalidArg naming the field and its value (never a secret).
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.InvalidArg, "remote options", format, args...)
	}
	switch {
	case o.PartBytes < MinPartBytes || o.PartBytes > MaxPartBytes:
		return bad("PartBytes=%d: want %d (5 MiB) to %d (1 GiB)", o.PartBytes, MinPartBytes, MaxPartBytes)
	case o.OpenBytes != -1 && (o.OpenBytes < 1 || o.OpenBytes > MaxOpenBytes):
		return bad("OpenBytes=%d: want -1 (one byte) or 1 to %d", o.OpenBytes, MaxOpenBytes)
	case o.MaxConcurrency < 1 || o.MaxConcurrency > 1024:
		return bad("MaxConcurrency=%d: want 1 to 1024", o.MaxConcurrency)
	case o.MaxAttempts < 1 || o.MaxAttempts > 100:
		return bad("MaxAttempts=%d: want 1 to 100", o.MaxAttempts)
	case o.RetryBudget < 0:
		return bad("RetryBudget=%v: want >= 0", o.RetryBudget)
	case o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase:
		return bad("BackoffBase=%v BackoffMax=%v: want 0 <= base <= max", o.BackoffBase, o.BackoffMax)
	case o.HeaderTimeout < 0 || o.StallTimeout < 0:
		return bad("HeaderTimeout=%v StallTimeout=%v: want >= 0", o.HeaderTimeout, o.StallTimeout)
	}
	if o.Endpoint != "" {
		if _, err := parseEndpoint(o.Endpoint, "Endpoint"); err != nil {
			return err
		}
	}
	return nil
}

// parseEndpoint checks an endpoint URL from field (an Options field or an
// environment variable name).
func parseEndpoint(s, field string) (*url.URL, error) {
	bad := func(why string) error {
		return errs.New(errs.InvalidArg, "remote options", "%s=%q: %s", field, Redact(s), why)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("want http://host[:port][/prefix] or https://...")
	}
	if u.User != nil {
		return nil, bad("credentials in the endpoint URL are not supported")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, bad("an endpoint has no query or fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}
