module github.com/cumemsaver/cumemsaver/bindings/go

go 1.19
