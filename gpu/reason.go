package gpu

var buildTags []string

var reason = "GPU target unavailable: this build has no CUDA backend (configure with -DMEMTIER_ENABLE_CUDA=ON once the GPU backend lands)"
