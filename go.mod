module github.com/dsh-sandbox/dsh-sandbox

go 1.26.8

require (
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/sys v0.50.0
)

require github.com/spf13/pflag v1.1.0

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
