// Package ext stands in for Traefik's nested module of the same path, which its module zip
// leaves out: the open-source build's extension points of its dynamic configuration, empty.
package ext

// HTTP extends dynamic.HTTP (nothing, in the open-source build).
type HTTP struct{}

// Router extends dynamic.Router (nothing, in the open-source build).
type Router struct{}
