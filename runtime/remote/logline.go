package remote

import "strconv"

// brief is an attempt's failure in one phrase for MEMTIER_LOG lines:
// "HTTP 503 SlowDown: Please reduce your request rate.", or what MemTier saw
// when no response came ("connection reset").
func (ae *attemptError) brief() string {
	s := ""
	if ae.status != 0 {
		s = "HTTP " + strconv.Itoa(ae.status)
		if ae.code != "" {
			s += " " + ae.code
		}
		if ae.message != "" {
			s += ": " + ae.message
		}
		if ae.reason != "" {
			s += " (" + ae.reason + ")"
		}
		return s
	}
	return ae.reason
}
