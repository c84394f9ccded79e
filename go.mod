module github.com/memtier/memtier

go 1.26.0

require (
	github.com/aws/smithy-go/aws-http-auth v1.2.2
	golang.org/x/sys v0.50.0
)
