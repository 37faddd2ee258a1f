module github.com/breakwater-dev/breakwater/sdk

go 1.24
