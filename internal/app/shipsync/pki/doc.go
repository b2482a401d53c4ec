// Package pki makes the development public-key infrastructure of shipsync's
// mutual TLS: a CA (ECDSA P-256), the shore server's certificate and one
// certificate per ship node whose identity is the node id (the subject CN and
// the URI SAN urn:shipsync:node:<id>). It uses crypto/x509 only.
//
// Files go in one directory of mode 0700, private keys with mode 0600, and
// nothing is ever overwritten: a second certificate for the same node (a
// rotation) is written under another name. It is meant for development and
// tests; a production deployment brings its own CA.
package pki
