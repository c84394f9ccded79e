package remote

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go/aws-http-auth/credentials"
	"github.com/aws/smithy-go/aws-http-auth/sigv4"
	v4 "github.com/aws/smithy-go/aws-http-auth/v4"

	"github.com/memtier/memtier/runtime/errs"
)

// Client sends ranged GETs for s3:// and http(s):// Locations over its own
// pool of keep-alive connections (HTTP/2 where the server offers it), signs
// s3:// requests with SigV4, and caps the requests in flight at
// Options.MaxConcurrency, lowered while the server throttles. Safe for
// concurrent use; Close it when done.
type Client struct {
	opts      Options
	res       resolved
	endpoint  *url.URL
	region    string
	signer    *sigv4.Signer
	hc        *http.Client
	transport *http.Transport // nil when Options.Transport replaced it
	lim       *limiter
	st        counters
	intr      interrupter // Interrupt's generations (interrupt.go)
}

// counters are the Client's statistics (atomic).
type counters struct {
	requests, retries, throttles, failures, bytes atomic.Uint64
}

// Stats are a Client's counters since NewClient. Counts are requests (one
// per attempt), bytes are body bytes written into destinations.
type Stats struct {
	Requests  uint64 // GETs sent, retries included
	Retries   uint64 // attempts after the first, over all parts
	Throttles uint64 // 503 and 429 answers
	Failures  uint64 // parts or opens that returned an error
	Bytes     uint64 // body bytes received into destinations
	Limit     int    // the concurrency limit now (Options.MaxConcurrency when not throttled)
}

// emptySHA256 is the payload hash of a GET (no body). S3 requires the
// X-Amz-Content-Sha256 header (versitygw rejects a request without it).
var emptySHA256 = func() []byte { h := sha256.Sum256(nil); return h[:] }()

// NewClient resolves opts (defaults, then the environment and shared files
// for whatever opts leaves empty, see Options) and returns a Client. Errors:
// errs.InvalidArg for a bad option or setting (named, never with a secret),
// errs.Unsupported for a profile whose credentials need a role or SSO,
// errs.Permission or errs.IO for an unreadable shared file. Having no
// credentials at all is not an error here: http(s) names need none, and the
// first s3:// request fails with errs.Permission saying what to set.
func NewClient(opts Options) (*Client, error) {
	o := opts
	if err := o.applyEnv(); err != nil {
		return nil, err
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res, err := resolveCredentials(&o)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, res: res}
	c.intr.cur.Store(newCallGen())

	c.region = firstSet(o.Region, o.Getenv("AWS_REGION"), o.Getenv("AWS_DEFAULT_REGION"), res.region, DefaultRegion)
	ep, field := o.Endpoint, "Endpoint"
	for _, v := range []struct{ val, name string }{
		{o.Getenv("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"},
		{o.Getenv("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"},
		{res.endpoint, "endpoint_url (profile)"},
	} {
		if ep == "" {
			ep, field = v.val, v.name
		}
	}
	if ep == "" {
		ep, field = "https://s3."+c.region+".amazonaws.com", "default endpoint"
	}
	if c.endpoint, err = parseEndpoint(ep, field); err != nil {
		return nil, err
	}

	c.signer = sigv4.New(func(so *v4.SignerOptions) {
		// S3 signs the path as sent (no second escaping) and wants the
		// payload hash as a header.
		so.DisableDoublePathEscape = true
		so.AddPayloadHashHeader = true
	})
	rt := o.Transport
	if rt == nil {
		c.transport = &http.Transport{
			Proxy:             http.ProxyFromEnvironment,
			DialContext:       (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2: true,
			// net/http keeps 2 idle connections per host by default
			// (http.DefaultMaxIdleConnsPerHost,
			// https://pkg.go.dev/net/http#pkg-constants): every part past 2
			// would dial anew.
			MaxIdleConns:        4 * o.MaxConcurrency,
			MaxIdleConnsPerHost: o.MaxConcurrency,
			MaxConnsPerHost:     o.MaxConcurrency,
			// Bodies are read straight into the destination (bufio hands a
			// read larger than its buffer to the connection); a larger
			// buffer only helps the headers and small bodies.
			ReadBufferSize:      64 << 10,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			// A transparent gzip would change the byte counts a ranged GET
			// is checked against.
			DisableCompression: true,
		}
		rt = c.transport
	}
	c.hc = &http.Client{
		Transport: rt,
		// A redirect would be followed without the signature (and could
		// leave the endpoint); S3 answers a wrong region with 301 and a
		// message, which is more useful reported than followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.lim = newLimiter(o.MaxConcurrency, max(o.BackoffBase, 10*time.Millisecond))
	return c, nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Options returns the Client's resolved options (defaults filled; the
// Credentials pointer is the caller's, as given).
func (c *Client) Options() Options { return c.opts }

// Region returns the signing region in use.
func (c *Client) Region() string { return c.region }

// Endpoint returns the S3 endpoint URL in use.
func (c *Client) Endpoint() string { return c.endpoint.String() }

// CredentialsOrigin says where the s3:// credentials came from
// ("Options.Credentials", "environment", `profile "name"`, "anonymous"),
// or "none"; it never includes a key.
func (c *Client) CredentialsOrigin() string {
	if c.res.origin == "" {
		return "none"
	}
	return c.res.origin
}

// Stats returns the Client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Requests: c.st.requests.Load(), Retries: c.st.retries.Load(), Throttles: c.st.throttles.Load(),
		Failures: c.st.failures.Load(), Bytes: c.st.bytes.Load(), Limit: c.lim.current(),
	}
}

// Close closes the idle connections of the Client's own pool. Requests in
// flight finish; the Client stays usable (new connections are dialled).
func (c *Client) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// objectURL returns the address of loc: Endpoint/bucket/key (path style,
// each key byte outside S3's unreserved set percent-encoded, '/' kept) or
// the http(s) URL as parsed.
func (c *Client) objectURL(loc Location) *url.URL {
	if loc.Kind == KindHTTP {
		u := *loc.URL
		return &u
	}
	u := *c.endpoint
	u.Path = c.endpoint.Path + "/" + loc.Bucket + "/" + loc.Key
	u.RawPath = c.endpoint.EscapedPath() + "/" + s3Escape(loc.Bucket) + "/" + s3Escape(loc.Key)
	return &u
}

// s3Escape percent-encodes s as SigV4's canonical URI wants it: every byte
// except A-Z a-z 0-9 - . _ ~ and '/'.
func s3Escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' ||
			ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[ch>>4])
		b.WriteByte(hex[ch&15])
	}
	return b.String()
}

// newGet builds a GET of bytes [first, last] (inclusive) of loc with the
// given conditional headers, signed for s3:// unless anonymous.
func (c *Client) newGet(ctx context.Context, loc Location, first, last uint64, cond http.Header) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "", nil)
	if err != nil {
		return nil, err
	}
	req.URL = c.objectURL(loc)
	req.Host = req.URL.Host
	req.Header.Set("Range", "bytes="+strconv.FormatUint(first, 10)+"-"+strconv.FormatUint(last, 10))
	for k, v := range cond {
		req.Header[k] = v
	}
	if loc.Kind != KindS3 || c.res.anonymous {
		return req, nil
	}
	if c.res.err != nil {
		return nil, c.res.err
	}
	err = c.signer.SignRequest(&sigv4.SignRequestInput{
		Request:     req,
		PayloadHash: emptySHA256,
		Credentials: credentials.Credentials{
			AccessKeyID: c.res.creds.AccessKeyID, SecretAccessKey: c.res.creds.SecretAccessKey,
			SessionToken: c.res.creds.SessionToken,
		},
		Service: "s3",
		Region:  c.region,
	})
	if err != nil {
		return nil, errs.New(errs.Internal, "sign request", "%s", c.res.scrub(err.Error()))
	}
	return req, nil
}
