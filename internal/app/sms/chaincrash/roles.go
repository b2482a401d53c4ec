package chaincrash

// The harness's roles, in the order they are killed in turn.
const (
	RoleAPI       = "api"
	RoleWorker    = "worker"
	RolePublisher = "publisher"
	RoleGateway   = "gateway"
	RoleCallback  = "callback"
)

// Roles are the roles of a run, each one OS process at a time.
var Roles = []string{RoleAPI, RoleWorker, RolePublisher, RoleGateway, RoleCallback}

// RolePoints are the fault points each role passes (internal/faultpoint):
// the API accepts in one statement and has none.
var RolePoints = map[string][]string{
	RoleWorker:    {"sms.admit.before-freeze", "sms.admit.after-freeze"},
	RolePublisher: {"dispatch.after-confirm"},
	RoleGateway:   {"sms.gateway.after-claim", "sms.gateway.after-submit", "sms.gateway.after-settle", "sms.gateway.after-result"},
	RoleCallback:  {"sms.complete.after-lock", "sms.complete.before-commit", "sms.intake.after-commit"},
}
