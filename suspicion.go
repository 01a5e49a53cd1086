package swim

import (
	"container/heap"
	"math"
	"time"

	"github.com/swim-go/swim/internal/wire"
)

// suspicion is the timer that turns a suspect member into a dead one unless
// it refutes first (SWIM §4.2). It is keyed by member and incarnation: a
// suspicion at a newer incarnation replaces it, a refutation cancels it.
type suspicion struct {
	name        string
	incarnation uint64
	start       time.Time
	deadline    time.Time
	from        string // who raised it, for the dead message
	index       int    // in the heap; -1 once removed
}

// suspicionHeap orders suspicions by deadline, ties broken by name so that
// the order of expiry never depends on map iteration.
type suspicionHeap []*suspicion

func (h suspicionHeap) Len() int { return len(h) }
func (h suspicionHeap) Less(i, j int) bool {
	if !h[i].deadline.Equal(h[j].deadline) {
		return h[i].deadline.Before(h[j].deadline)
	}
	return h[i].name < h[j].name
}
func (h suspicionHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *suspicionHeap) Push(x any) {
	s := x.(*suspicion)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *suspicionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.index = -1
	return s
}

// suspicionTimeout is SuspicionMult·max(1, log10 N)·ProbeInterval (SWIM §4.2
// with memberlist's scaling by cluster size): larger clusters need more time
// for the suspicion to reach the suspect and its refutation to come back.
func (m *Machine) suspicionTimeout() time.Duration {
	n := float64(m.NumMembers())
	scale := math.Max(1, math.Log10(math.Max(1, n)))
	return time.Duration(float64(m.cfg.SuspicionMult) * scale * float64(m.cfg.ProbeInterval))
}

// startSuspicion arms (or re-arms, for a newer incarnation) the timer of a
// suspect member.
func (m *Machine) startSuspicion(now time.Time, name string, inc uint64, from string) {
	if old, ok := m.suspicions[name]; ok {
		if old.incarnation >= inc {
			return
		}
		m.cancelSuspicion(name)
	}
	s := &suspicion{
		name:        name,
		incarnation: inc,
		start:       now,
		deadline:    now.Add(m.suspicionTimeout()),
		from:        from,
	}
	m.suspicions[name] = s
	heap.Push(&m.suspHeap, s)
}

// cancelSuspicion stops a member's suspicion timer, if any.
func (m *Machine) cancelSuspicion(name string) {
	s, ok := m.suspicions[name]
	if !ok {
		return
	}
	delete(m.suspicions, name)
	if s.index >= 0 {
		heap.Remove(&m.suspHeap, s.index)
	}
}

// expireSuspicions handles every suspicion whose timer ran out: it starts
// the final check, or declares the member dead.
func (m *Machine) expireSuspicions(now time.Time) {
	for len(m.suspHeap) > 0 && !now.Before(m.suspHeap[0].deadline) {
		s := heap.Pop(&m.suspHeap).(*suspicion)
		delete(m.suspicions, s.name)
		mem, ok := m.members[s.name]
		if !ok || mem.State != StateSuspect || mem.Incarnation != s.incarnation {
			continue
		}
		if m.cfg.FinalCheck {
			m.startFinalCheck(now, mem)
			continue
		}
		m.stats.DeathsDeclared++
		m.declareDead(now, mem, s.incarnation, m.self.Name, false)
	}
}

// finalCheck is the last direct ping of a suspect before it is declared
// dead (Geode's final check). It carries the suspicion, so a member that is
// alive but missed the accusation, or whose refutation missed us, answers
// with its refutation piggybacked on the ack.
type finalCheck struct {
	seq         uint32
	name        string
	incarnation uint64
	expires     time.Time
	done        bool
}

func (m *Machine) startFinalCheck(now time.Time, mem *memberState) {
	fc := &finalCheck{
		seq:         m.nextSeq(),
		name:        mem.Name,
		incarnation: mem.Incarnation,
		expires:     now.Add(m.cfg.ProbeTimeout),
	}
	m.finalChecks[fc.seq] = fc
	m.finalFIFO = append(m.finalFIFO, fc)
	m.stats.FinalChecks++
	ping := &wire.Ping{Seq: fc.seq, Target: mem.Name, From: m.self.Name}
	m.send(mem.Addr, ping)
	if m.cfg.TCPChecks {
		// The same check over TCP, for networks that drop UDP or lose
		// the one packet that matters.
		m.streamChecks[m.startStreamPing(mem, ping)] = fc
	}
}

// finalCheckAnswered handles the ack of a final check: the member lives, so
// its suspicion starts over instead of ending in death. Its refutation,
// carried on the ack, normally clears the suspicion at once.
func (m *Machine) finalCheckAnswered(now time.Time, fc *finalCheck) {
	if fc.done {
		return
	}
	fc.done = true
	delete(m.finalChecks, fc.seq)
	m.stats.FinalChecksSaved++
	mem, ok := m.members[fc.name]
	if ok && mem.State == StateSuspect && mem.Incarnation == fc.incarnation {
		m.startSuspicion(now, fc.name, fc.incarnation, m.self.Name)
	}
}

// expireFinalChecks declares dead the suspects that did not answer their
// final check. All checks live ProbeTimeout, so they expire in order.
func (m *Machine) expireFinalChecks(now time.Time) {
	i := 0
	for ; i < len(m.finalFIFO); i++ {
		fc := m.finalFIFO[i]
		if now.Before(fc.expires) {
			break
		}
		if fc.done {
			continue
		}
		delete(m.finalChecks, fc.seq)
		mem, ok := m.members[fc.name]
		if !ok || mem.State != StateSuspect || mem.Incarnation != fc.incarnation {
			continue
		}
		m.stats.DeathsDeclared++
		m.declareDead(now, mem, fc.incarnation, m.self.Name, false)
	}
	if i > 0 {
		clear(m.finalFIFO[:i])
		m.finalFIFO = m.finalFIFO[i:]
	}
}
