package cmppconn

import (
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// keepalive runs the standard's link check (3.0 §7): after C
// (ActiveTestInterval) without a packet from the ISMG it sends ActiveTest and
// waits T (ActiveTestTimeout); unanswered, it sends again at once, N
// (ActiveTestTries) tries in all, and then closes the connection as dead
// (ErrLinkDead), which makes every Submit in flight Unknown. Any packet from
// the ISMG after a probe went out counts as an answer: the link is alive.
// Probes take no window slot, so a full window never keeps one from going.
func (c *Conn) keepalive() {
	defer c.wg.Done()
	clock := c.cfg.Clock
	for {
		idle := time.Duration(clock.Now().UnixNano() - c.lastRecv.Load())
		if idle < c.cfg.ActiveTestInterval {
			select {
			case <-clock.After(c.cfg.ActiveTestInterval - idle):
				continue
			case <-c.done:
				return
			}
		}
		alive := false
		for try := 0; try < c.cfg.ActiveTestTries && !alive; try++ {
			sentAt := clock.Now().UnixNano()
			seq, req, err := c.request(&cmpp.ActiveTest{}, cmpp.CmdActiveTestResp)
			if err != nil {
				return // closed
			}
			select {
			case r := <-req.done:
				if r.err != nil {
					return // the connection closed under it
				}
				alive = true
			case <-clock.After(c.cfg.ActiveTestTimeout):
				if r := c.abandon(seq, req, ErrLinkDead); r.err == nil {
					alive = true // the response beat the abandon
				} else {
					c.stats.activeTestsUnanswered.Add(1)
					alive = c.lastRecv.Load() >= sentAt
				}
			case <-c.done:
				return
			}
		}
		if !alive {
			c.closeWith(ErrLinkDead)
			return
		}
	}
}
