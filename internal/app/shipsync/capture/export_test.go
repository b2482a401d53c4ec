package capture

// DebeziumValue exposes debeziumValue to the tests.
var DebeziumValue = debeziumValue
