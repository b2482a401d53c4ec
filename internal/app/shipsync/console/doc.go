// Package console is shipsync's management API and web console, served by
// the shore on a protected listener (relayhttp): the JSON API under
// /api/v1/ and the console's pages under /console/, which talk to it.
//
// Every API request carries "Authorization: Bearer <token>"; a users file
// maps each token to an actor (the name audit entries record) and a role:
// viewer (reads), operator (conflict decisions and cancels) or admin
// (everything, rule releases when they come). The console's static files
// carry no data and need no token; the page asks for one and keeps it in
// the browser tab's sessionStorage.
//
// Every write carries an Idempotency-Key header: a repeat with the same key
// and the same request gets the stored answer without acting again, the
// same key with another request is refused (422). Writes that change an
// object which can change under the client (a conflict case) carry the
// version the client saw, and a changed object answers 409. Every write
// that acts is audited (actor, time, object, before and after summaries,
// reason, the request's trace id), in the same transaction as the change.
//
// Data minimisation: logs and error answers never carry row values or
// whole primary keys. Listings show a record by its key hash and a masked
// key; a conflict's row values are shown to operators and admins only (who
// decide on them), masked for viewers.
package console
