module github.com/cumemsaver/cumemsaver-go

go 1.19
