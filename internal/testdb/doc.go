// Package testdb gives tests real, isolated databases on the machine's servers:
// a fresh PostgreSQL schema per test (PGSchema, PGDriver) and a fresh MariaDB
// database per test (MariaDB). Every helper cleans up in t.Cleanup.
//
// Tests that need a server FAIL when it cannot be reached, with a message that
// names the server and the environment variable to set; they never skip
// (STYLE.md §3).
package testdb
