#!/bin/sh
# Regenerates the Go stubs in gaigelpb/ from proto/gaigel/v1/*.proto.
# protoc-gen-go and protoc-gen-go-grpc are pinned in tools/go.mod. buf comes from $BUF,
# else the buf on PATH (the project's Python venv has it: pip install buf-bin), else it
# is built from tools/go.mod too (slow the first time: several minutes).
set -eu
cd "$(dirname "$0")"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd tools && go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
buf="${BUF:-$(command -v buf || true)}"
if [ -z "$buf" ]; then
	(cd tools && go build -o "$bin/" github.com/bufbuild/buf/cmd/buf)
	buf="$bin/buf"
fi
rm -rf gaigelpb
PATH="$bin:$PATH" "$buf" generate --template buf.gen.yaml
