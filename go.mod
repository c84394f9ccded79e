module github.com/memtier/memtier

go 1.26.0

require (
	github.com/aws/smithy-go/aws-http-auth v1.2.2
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/sys v0.50.0
)

require github.com/klauspost/cpuid/v2 v2.2.10 // indirect
