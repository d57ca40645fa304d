module github.com/spillwaylb/spillway

go 1.26.8

require (
	github.com/maxmind/mmdbwriter v1.0.0
	github.com/miekg/dns v1.1.73
	github.com/oschwald/maxminddb-golang v1.13.1
)

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	go4.org/netipx v0.0.0-20220812043211-3cc044ffd68d // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
