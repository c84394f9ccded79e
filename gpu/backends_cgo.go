//go:build cgo

package gpu

// Every cgo build has both backends: they dlopen libcuda.so.1 and
// libcufile.so.0 at run time and need no CUDA headers or toolkit to build, so
// a machine without a GPU gets the same library and answers "unavailable"
// when it runs (Init, OpenGDS).
func init() { buildTags = append(buildTags, "cuda", "gds") }
