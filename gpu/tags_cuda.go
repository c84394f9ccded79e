//go:build memtier_cuda

package gpu

func init() {
	buildTags = append(buildTags, "cuda")
	reason = "GPU target unavailable: this build has the CUDA tag, but the CUDA backend is not implemented yet (GPU issue)"
}
