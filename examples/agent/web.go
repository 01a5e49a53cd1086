package main

import (
	"context"
	"crypto/ed25519"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

// ui is the live page: HTML, CSS and JavaScript served from the binary,
// with nothing fetched from elsewhere (the Content-Security-Policy below
// forbids it).
//
//go:embed ui
var ui embed.FS

// member is what the HTTP endpoints read of the running member;
// *swim.Memberlist implements it.
type member interface {
	Snapshot() ([]swim.Member, uint64)
	LocalMember() swim.Member
	NumMembers() int
	RTT(name string) (time.Duration, bool)
	HealthScore() int
	Suspicions() []swim.Suspicion
	Signatures() swim.SignatureMode
	IdentityKey() ed25519.PublicKey
}

var _ member = (*swim.Memberlist)(nil)

// web serves the agent's HTTP endpoints (-http).
type web struct {
	ml        member
	events    *recentEvents
	healthMax int // the highest health score: AwarenessMaxMultiplier-1
	metrics   http.Handler
	now       func() time.Time
}

// handler routes the endpoints:
//
//	/         the live page
//	/members  every member, the local health, the suspicions in progress
//	/events   the recent events (?after=SEQ: only those after it)
//	/health   200 while the member runs, 503 once it left or stopped
//	/metrics  Prometheus
func (w *web) handler() http.Handler {
	static, _ := fs.Sub(ui, "ui") // the directory is embedded: cannot fail
	files := http.FileServerFS(static)
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", files)
	mux.Handle("GET /ui/", http.StripPrefix("/ui", files))
	mux.HandleFunc("GET /members", w.members)
	mux.HandleFunc("GET /events", w.recent)
	mux.HandleFunc("GET /health", w.health)
	mux.Handle("GET /metrics", w.metrics)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h := rw.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(rw, r)
	})
}

// membersView is the body of /members.
type membersView struct {
	Self       string          `json:"self"`
	State      string          `json:"state"` // this member's
	Time       time.Time       `json:"time"`  // of the view, by this member's clock
	Health     healthView      `json:"health"`
	Signatures string          `json:"signatures"`         // this member's mode: off, sign, required
	Identity   string          `json:"identity,omitempty"` // this member's public key, base64
	Members    []memberView    `json:"members"`
	Suspicions []suspicionView `json:"suspicions"`
}

// healthView is the local health score (Lifeguard): 0 is healthy.
type healthView struct {
	Score int `json:"score"`
	Max   int `json:"max"`
}

type memberView struct {
	Name        string `json:"name"`
	Addr        string `json:"addr"`
	State       string `json:"state"`
	Incarnation uint64 `json:"incarnation"`
	// Meta is the metadata as text; MetaBase64 instead when it is not
	// UTF-8. Labels holds it when it is key=value pairs.
	Meta       string            `json:"meta,omitempty"`
	MetaBase64 string            `json:"meta_base64,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// RTTMillis is the smoothed round trip of this member's probes; null
	// before the first answer, and for this member itself.
	RTTMillis *float64 `json:"rtt_ms"`
	Local     bool     `json:"local,omitempty"`
}

type suspicionView struct {
	Name          string    `json:"name"`
	Incarnation   uint64    `json:"incarnation"`
	From          string    `json:"from"`
	Confirmations int       `json:"confirmations"`
	Since         time.Time `json:"since"`
	Deadline      time.Time `json:"deadline"`
	// RemainingMillis is the time to Deadline at Time; negative once the
	// final check runs.
	RemainingMillis float64 `json:"remaining_ms"`
}

func (w *web) members(rw http.ResponseWriter, _ *http.Request) {
	all, _ := w.ml.Snapshot()
	self := w.ml.LocalMember()
	now := w.now()
	v := membersView{
		Self: self.Name, State: self.State.String(), Time: now,
		Health:     healthView{Score: w.ml.HealthScore(), Max: w.healthMax},
		Signatures: w.ml.Signatures().String(),
		Identity:   encodeKey(w.ml.IdentityKey()),
		Members:    make([]memberView, 0, len(all)),
		Suspicions: []suspicionView{},
	}
	for _, m := range all {
		mv := memberView{Name: m.Name, Addr: m.Addr.String(), State: m.State.String(), Incarnation: m.Incarnation}
		if m.Name == self.Name {
			// The snapshot's own entry says alive until Shutdown;
			// LocalMember says what this member is now.
			mv.State, mv.Local = self.State.String(), true
		} else if rtt, ok := w.ml.RTT(m.Name); ok {
			ms := float64(rtt) / float64(time.Millisecond)
			mv.RTTMillis = &ms
		}
		if utf8.Valid(m.Meta) {
			mv.Meta = string(m.Meta)
		} else {
			mv.MetaBase64 = base64.StdEncoding.EncodeToString(m.Meta)
		}
		mv.Labels, _ = metaLabels(m.Meta)
		v.Members = append(v.Members, mv)
	}
	for _, s := range w.ml.Suspicions() {
		v.Suspicions = append(v.Suspicions, suspicionView{
			Name: s.Name, Incarnation: s.Incarnation, From: s.From, Confirmations: s.Confirmations,
			Since: s.Since, Deadline: s.Deadline,
			RemainingMillis: float64(s.Deadline.Sub(now)) / float64(time.Millisecond),
		})
	}
	writeJSON(rw, http.StatusOK, v)
}

// eventsView is the body of /events.
type eventsView struct {
	Events  []eventView `json:"events"`
	LastSeq uint64      `json:"last_seq"`
	Limit   int         `json:"limit"` // how many events the agent keeps
}

func (w *web) recent(rw http.ResponseWriter, r *http.Request) {
	var after uint64
	if s := r.URL.Query().Get("after"); s != "" {
		var err error
		if after, err = strconv.ParseUint(s, 10, 64); err != nil {
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "after: want an event Seq (a number)"})
			return
		}
	}
	events, last := w.events.after(after)
	writeJSON(rw, http.StatusOK, eventsView{Events: events, LastSeq: last, Limit: recentLimit})
}

// healthBody is the body of /health.
type healthBody struct {
	Status      string `json:"status"` // ok, or the member's state: left, dead (shut down)
	Name        string `json:"name"`
	Members     int    `json:"members"` // live ones, this one included
	HealthScore int    `json:"health_score"`
}

func (w *web) health(rw http.ResponseWriter, _ *http.Request) {
	self := w.ml.LocalMember()
	b := healthBody{Status: "ok", Name: self.Name, Members: w.ml.NumMembers(), HealthScore: w.ml.HealthScore()}
	code := http.StatusOK
	if self.State != swim.StateAlive {
		b.Status, code = self.State.String(), http.StatusServiceUnavailable
	}
	writeJSON(rw, code, b)
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(v) // the client went away: nothing to do
}

// serveHTTP listens on addr and serves h until the returned stop is
// called (more than once is fine); it returns the address it listens on,
// with the port it picked for port 0.
func serveHTTP(addr string, h http.Handler, logger *zap.Logger) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          zap.NewStdLog(logger.Named("http")),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", zap.Error(err))
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx) // past the timeout, open requests are cut
			_ = srv.Close()
			<-done
		})
	}
	return stop, ln.Addr().String(), nil
}
