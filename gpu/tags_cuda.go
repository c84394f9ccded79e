//go:build memtier_cuda

package gpu

func init() { buildTags = append(buildTags, "cuda") }
