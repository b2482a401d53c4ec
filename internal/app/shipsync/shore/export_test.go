package shore

// SetHold makes the batch handler of cfg call hold once a request passed
// every limit (tests hold a request in flight with it).
func SetHold(cfg *Config, hold func()) { cfg.hold = hold }

// InsertRetries returns how many batches in has inserted with ON CONFLICT
// DO NOTHING after their plain insert violated a unique index.
func InsertRetries(in *Inbox) int64 { return in.insertRetries.Load() }
