// Command gssh turns a handful of GPU servers reached over SSH into one
// shared view (and, later, one fair queue).
package main

import "os"

func main() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())) }
