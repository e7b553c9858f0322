// Package testkit holds the fakes and fixtures tests use in place of what is
// outside this network, each speaking the real wire format: a Debian test
// image built for real, a scripted Anthropic Messages API (Anthropic) that
// the real Claude Code talks to, and a fake GitHub with its Repos over git's
// smart HTTP. Only tests import it.
package testkit
