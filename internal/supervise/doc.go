// Package supervise keeps the roles of a crash harness running as real OS
// processes of the relay binary: it starts a role's next life when one ends,
// arms lives with fault points (internal/faultpoint), kills them with
// SIGKILL on request, and books how each life ended — killed by the harness,
// at a fault point, or on its own (a problem the harness reports).
package supervise
