// Package shipsyncpb holds the Protobuf messages of the shipsync ship–shore
// data protocol (package relay.shipsync.v1): ChangeEvent, UploadBatch and its
// per-event statuses, receipts, downlink commands and their acks, heartbeat,
// node configuration and the error body of refusals.
//
// shipsync.pb.go is generated from shipsync.proto by internal/tools/protogen
// (pure Go: no protoc needed); regenerate after editing the .proto with
// `go generate ./internal/app/shipsync/shipsyncpb` or `make generate`. The
// protogen test fails while the committed file is out of date. The codec
// rules (versions, limits, compression, checksum, validation) are in package
// internal/app/shipsync/wire; docs/shipsync/protocol.md describes both.
package shipsyncpb

//go:generate go run github.com/relayhq/relay/internal/tools/protogen -dir .
