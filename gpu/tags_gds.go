//go:build memtier_gds

package gpu

func init() { buildTags = append(buildTags, "gds") }
