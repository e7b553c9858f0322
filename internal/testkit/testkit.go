// Package testkit holds the fakes and fixtures tests use in place of what is
// outside this network, each speaking the real wire format: a Debian test
// image built for real and served from an in-process OCI registry, and later
// a scripted Anthropic Messages API and a fake GitHub. Only tests import it.
package testkit
