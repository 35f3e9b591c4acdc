// Package kubernetes holds the Sluice worker's Kubernetes manifests (the YAML files of this
// directory) and the test that decodes them strictly into the Kubernetes API types and checks
// them against the worker: its health endpoints, memory budget, secret files and config.
package kubernetes
