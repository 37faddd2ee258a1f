module github.com/breakwater-dev/breakwater/examples/route-plugin

go 1.26

require github.com/breakwater-dev/breakwater/sdk v0.0.0

replace github.com/breakwater-dev/breakwater/sdk => ../../sdk
