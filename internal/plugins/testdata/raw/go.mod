module breakwater.test/raw

go 1.26
