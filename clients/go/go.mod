module github.com/gaigel-arena/gaigel/clients/go

go 1.22
