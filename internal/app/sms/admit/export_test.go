package admit

// SetAfterCount makes s run f with the batch's counter keys after reading
// and counting them, before the batch writes anything.
func SetAfterCount(s *Stage, f func(keys []string)) { s.afterCount = f }
