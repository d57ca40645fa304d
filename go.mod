module github.com/spillwaylb/spillway

go 1.26.8

require (
	github.com/miekg/dns v1.1.73
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
