// Package remote is MemTier's second Source (runtime/source): objects in S3
// (s3://bucket/key, path-style against an endpoint) and behind plain HTTP(S)
// (http://..., https://...), read as parallel ranged GETs into caller memory.
//
// Layering: remote sits beside source.Local at the bottom of the
// tier stack. It knows nothing of the cache tiers, the engine or capi; it
// imports only runtime/errs and runtime/source, plus net/http and the SigV4
// signer github.com/aws/smithy-go/aws-http-auth (no AWS SDK). Importing it
// adds net/http and crypto/tls to the shared library: +2.6 MB measured on
// a c-shared build with the project's flags, of which smithy is about
// 0.1 MB.
//
// Files, one job each:
//   - url.go: parsing s3:// and http(s):// names into a Location;
//   - options.go: Options, defaults and the AWS_* environment;
//   - credentials.go, profile.go: static, environment and shared-file
//     credentials;
//   - client.go: the connection pool, request building and SigV4 signing;
//   - get.go: one ranged GET and the checks on its answer;
//   - retry.go: jittered exponential backoff around get.go;
//   - throttle.go: the per-client concurrency limit, lowered while throttled;
//   - contentrange.go, xmlerror.go: parsers for Content-Range and S3 error
//     bodies (fuzzed in fuzz_test.go);
//   - errors.go: mapping failures to errs codes, with secrets scrubbed;
//   - object.go, source.go, read.go: the source.Source implementation.
//
// Tests: fault_test.go (an httptest server injecting 503/429, stalls,
// truncation, resets, 200 for 206, wrong Content-Range, overwrites),
// versitygw_test.go (a real S3 gateway, MEMTIER_VERSITYGW; started by
// scripts/versitygw.sh in the go_remote_versitygw ctest entry) and the
// benchmarks BenchmarkVersitygw256MiB and BenchmarkLoopbackHTTP256MiB.
//
// Concurrency: a Client and a Source are safe for concurrent use; every
// request goes through the Client's limiter, so the number of GETs in flight
// never exceeds Options.MaxConcurrency, whatever the number of callers.
package remote
