module github.com/breakwater-dev/breakwater/examples/quota-header-plugin

go 1.24

require github.com/breakwater-dev/breakwater/sdk v0.0.0

replace github.com/breakwater-dev/breakwater/sdk => ../../sdk
