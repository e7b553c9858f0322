// Package testkit holds the fakes and fixtures tests use in place of what is
// outside this network, each speaking the real wire format: a Debian test
// image built for real, a scripted Anthropic Messages API (Anthropic) that
// the real Claude Code talks to, a fake GitHub with its Repos over git's
// smart HTTP, and a real MCP server on the official MCP Go SDK (MCPServer).
// Only tests import it.
package testkit
