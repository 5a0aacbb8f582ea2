package workers

import "time"

// Gather runs step each time wake fires, after waiting delay (if positive)
// for more work to join what woke it — a WAL syncer gathering commits
// before its fsync — and once more when stop is closed, then returns. It
// is the loop of such a goroutine.
func Gather(wake, stop <-chan struct{}, delay time.Duration, step func()) {
	gather := time.NewTimer(delay)
	gather.Stop()
	for {
		select {
		case <-wake:
			if delay > 0 {
				gather.Reset(delay)
				select {
				case <-gather.C:
				case <-stop:
					gather.Stop()
					step()
					return
				}
			}
			step()
		case <-stop:
			step()
			return
		}
	}
}
