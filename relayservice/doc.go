// Package relayservice assembles a pipeline: it runs an intake, a relay
// Engine, its Dispatchers, an acknowledgement writer, maintenance (retention,
// archival) and app jobs as one Service, under the pipeline's lock, so that
// only one instance of a pipeline is ever active.
//
// Run waits for the lock (package relaylock), then starts the parts in the
// order that keeps nothing waiting: the engine and the dispatchers first, so
// that whatever the intake enqueues and the engine emits is taken at once;
// then the acknowledgement writer and the maintenance loops; then the app
// jobs; the intake last. When ctx ends, the lock is lost or a part fails, it
// stops them in the reverse order — the intake first, so nothing new arrives
// while the rest drains — within one bounded stop timeout.
//
// The parts are built by the caller (relay.NewEngine, relay.NewDispatcher,
// relayintake.New, ...): the Service owns only their running. Everything it
// needs to wire (the intake waking the engine after a commit) it wires in New.
package relayservice
