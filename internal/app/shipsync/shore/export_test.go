package shore

// SetHold makes the batch handler of cfg call hold once a request passed
// every limit (tests hold a request in flight with it).
func SetHold(cfg *Config, hold func()) { cfg.hold = hold }
