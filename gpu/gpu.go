// Package gpu will hold the CUDA driver API and cuFile (GDS) backends, loaded
// with dlopen at run time so one build runs with and without a GPU. Until the
// GPU issue lands, every build reports the GPU target as unavailable and says
// why, so the engine answers MEMTIER_ERR_UNSUPPORTED instead of guessing.
//
// gpu never imports the engine; the engine asks it for capabilities.
package gpu

// Available reports whether GPU reads can be served by this build on this
// machine. Safe for concurrent use.
func Available() bool { return false }

// Reason explains Available's answer in one line, naming what is missing.
func Reason() string { return reason }

// BuildTags lists the GPU backends compiled in ("cuda", "gds"), for diagnostics.
func BuildTags() []string { return buildTags }
