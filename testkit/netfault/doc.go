// Package netfault injects network faults between a process under test and a real service: a
// TCP proxy that forwards to the service's address and can cut every connection through it and
// refuse new ones until it is restored. Fault tests put it in front of the real Temporal
// frontend to take one worker's session away while the server and the other clients stay up.
package netfault
