// Package shipcrash is shipsync's ship-side crash harness: the whole uplink
// of the demo (internal/app/shipsync/shipdemo) — a ship database with the
// trigger capture, the CDC topics on an in-process Kafka-API cluster, the
// ship client, the shore, the shore database — with the client and the
// shore run as real processes of the relay binary. While a workload writes
// the ship database the client is killed with SIGKILL at random moments and
// at each of its fault points and restarted on the same state file, the
// shore is killed and restarted, and the link between them is cut through a
// weaklink proxy. When the chain is quiet every row and every event is
// reconciled: nothing lost, nothing applied twice.
//
// It backs `relay shipsync chaos --side ship` and TestShipClientCrash.
package shipcrash
