package main

import (
	_ "github.com/coder/websocket"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/nftables"
	_ "github.com/vishvananda/netlink"
	_ "golang.org/x/sys/unix"
	_ "modernc.org/sqlite"
	_ "github.com/opencontainers/runtime-spec/specs-go"
)

func main() {}
