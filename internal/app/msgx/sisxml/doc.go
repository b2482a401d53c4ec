// Package sisxml decodes the SIS XML messages an AODB writes into the CMINMSGS
// mailbox (seed 000 §2) into typed, presence-aware values. The contract it
// implements is docs/msgx/sis-xml.md; every message kind has an example under
// internal/app/msgx/testdata/.
//
// Messages in the form an AODB writes are read by a hand-written scanner
// (scan.go); everything else, every malformed message included, by
// encoding/xml, which decides every error (see parse).
//
// Decode never panics, reads at most MaxSize bytes and does no I/O: encoding/xml
// processes no DTD, so no external (or internal) entity is ever expanded; an
// undefined entity reference is a syntax error (MALFORMED). A message with more
// than MaxElementsDefault elements is MALFORMED before it is parsed; Limits
// sets other bounds. Error text quotes at most relaytype.MaxQuotedValue bytes
// of a value and is at most relaytype.MaxErrorText bytes long.
//
// Errors are classified for the engine with relaytype.Classify: MALFORMED (the
// message itself is invalid — never retried), PROTOCOL (a package whose
// declared record count RCNT is wrong, the whole-package check of seed 000
// §7.1 step 2 — never retried) or CODEC_ERROR (a recognised envelope whose
// body this codec cannot map — retried, a codec fix can handle it). A kind this codec does not know is not an error: it decodes to
// KindUnsupported and the dispatcher fails it as UNSUPPORTED.
package sisxml
