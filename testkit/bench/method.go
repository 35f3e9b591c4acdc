package bench

import _ "embed" // methodNotes

//go:embed method.md
var methodNotes string

// MethodNotes is the report's section on how the figures are taken (method.md).
func MethodNotes() string { return methodNotes }
