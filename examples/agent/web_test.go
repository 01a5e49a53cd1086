package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// fakeMember is a member whose view the test sets.
type fakeMember struct {
	members    []swim.Member
	self       swim.Member
	rtts       map[string]time.Duration
	health     int
	suspicions []swim.Suspicion
	mode       swim.SignatureMode
	key        ed25519.PublicKey
}

func (f *fakeMember) Snapshot() ([]swim.Member, uint64) { return f.members, 0 }
func (f *fakeMember) LocalMember() swim.Member          { return f.self }
func (f *fakeMember) HealthScore() int                  { return f.health }
func (f *fakeMember) Suspicions() []swim.Suspicion      { return f.suspicions }
func (f *fakeMember) Signatures() swim.SignatureMode    { return f.mode }
func (f *fakeMember) IdentityKey() ed25519.PublicKey    { return f.key }
func (f *fakeMember) RTT(name string) (time.Duration, bool) {
	d, ok := f.rtts[name]
	return d, ok
}
func (f *fakeMember) NumMembers() int {
	n := 0
	for _, m := range f.members {
		if m.State == swim.StateAlive || m.State == swim.StateSuspect {
			n++
		}
	}
	return n
}

var webNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newFakeWeb() (*web, *fakeMember) {
	addr := func(p uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), p) }
	f := &fakeMember{
		members: []swim.Member{
			{Name: "a", Addr: addr(1), State: swim.StateAlive, Incarnation: 2, Meta: []byte("zone=eu, role = db")},
			{Name: "b", Addr: addr(2), State: swim.StateSuspect, Incarnation: 5, Meta: []byte("plain text")},
			{Name: "c", Addr: addr(3), State: swim.StateDead, Incarnation: 1, Meta: []byte{0xff, 0x00}},
		},
		rtts:   map[string]time.Duration{"a": time.Millisecond, "b": 1500 * time.Microsecond},
		health: 2,
		mode:   swim.SignaturesSign,
		key:    bytes.Repeat([]byte{7}, ed25519.PublicKeySize),
		suspicions: []swim.Suspicion{{
			Name: "b", Incarnation: 5, From: "c", Confirmations: 1,
			Since: webNow.Add(-time.Second), Deadline: webNow.Add(2500 * time.Millisecond),
		}},
	}
	f.self = f.members[0]
	w := &web{ml: f, events: &recentEvents{}, healthMax: 7, metrics: http.NotFoundHandler(), now: func() time.Time { return webNow }}
	return w, f
}

func get(t *testing.T, h http.Handler, path string) (*http.Response, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, body
}

func TestMembersEndpoint(t *testing.T) {
	w, _ := newFakeWeb()
	res, body := get(t, w.handler(), "/members")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	var v membersView
	require.NoError(t, json.Unmarshal(body, &v))

	require.Equal(t, "a", v.Self)
	require.Equal(t, "alive", v.State)
	require.Equal(t, healthView{Score: 2, Max: 7}, v.Health)
	require.Equal(t, "sign", v.Signatures)
	require.Equal(t, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)), v.Identity)
	require.Len(t, v.Members, 3)
	a, b, c := v.Members[0], v.Members[1], v.Members[2]
	require.True(t, a.Local)
	require.Nil(t, a.RTTMillis, "no round trip to oneself")
	require.Equal(t, map[string]string{"zone": "eu", "role": "db"}, a.Labels)
	require.Equal(t, "suspect", b.State)
	require.Equal(t, uint64(5), b.Incarnation)
	require.Equal(t, "10.0.0.1:2", b.Addr)
	require.NotNil(t, b.RTTMillis)
	require.InDelta(t, 1.5, *b.RTTMillis, 1e-9)
	require.Equal(t, "plain text", b.Meta)
	require.Nil(t, b.Labels, "text that is not key=value pairs has no labels")
	require.Equal(t, "dead", c.State)
	require.Nil(t, c.RTTMillis, "no answer from c yet")
	require.Empty(t, c.Meta)
	require.Equal(t, "/wA=", c.MetaBase64, "binary metadata travels as base64")

	require.Len(t, v.Suspicions, 1)
	s := v.Suspicions[0]
	require.Equal(t, "b", s.Name)
	require.Equal(t, "c", s.From)
	require.Equal(t, 1, s.Confirmations)
	require.InDelta(t, 2500, s.RemainingMillis, 1e-6)
	require.True(t, s.Deadline.Equal(webNow.Add(2500*time.Millisecond)))
}

func TestHealthEndpoint(t *testing.T) {
	w, f := newFakeWeb()
	res, body := get(t, w.handler(), "/health")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var hb healthBody
	require.NoError(t, json.Unmarshal(body, &hb))
	require.Equal(t, healthBody{Status: "ok", Name: "a", Members: 2, HealthScore: 2}, hb)

	for _, st := range []swim.State{swim.StateLeft, swim.StateDead} {
		f.self.State = st
		res, body = get(t, w.handler(), "/health")
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%v", st)
		require.NoError(t, json.Unmarshal(body, &hb))
		require.Equal(t, st.String(), hb.Status)
	}
}

func TestEventsEndpoint(t *testing.T) {
	w, _ := newFakeWeb()
	for i := 1; i <= recentLimit+20; i++ {
		w.events.add(swim.Event{Kind: swim.EventJoin, Seq: uint64(i), Time: webNow.Add(time.Duration(i) * time.Second),
			Member: swim.Member{Name: "m", State: swim.StateAlive, Incarnation: uint64(i)}})
	}
	var v eventsView
	res, body := get(t, w.handler(), "/events")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NoError(t, json.Unmarshal(body, &v))
	require.Len(t, v.Events, recentLimit, "only the last events are kept")
	require.Equal(t, uint64(21), v.Events[0].Seq)
	require.Equal(t, uint64(recentLimit+20), v.LastSeq)
	require.Equal(t, "join", v.Events[0].Kind)
	require.True(t, v.Events[0].Time.Equal(webNow.Add(21*time.Second)))

	_, body = get(t, w.handler(), "/events?after=115")
	require.NoError(t, json.Unmarshal(body, &v))
	require.Len(t, v.Events, 5)
	require.Equal(t, uint64(116), v.Events[0].Seq)

	res, _ = get(t, w.handler(), "/events?after=x")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
}

// TestPageIsSelfContained: the page and its assets are served from the
// binary, under a policy that forbids loading anything from elsewhere, and
// refer to nothing outside the agent.
func TestPageIsSelfContained(t *testing.T) {
	w, _ := newFakeWeb()
	h := w.handler()
	res, page := get(t, h, "/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Type"), "text/html")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(page), -1)
	require.NotEmpty(t, refs)
	for _, r := range refs {
		require.NotRegexp(t, `^(https?:)?//`, r[1], "the page loads from elsewhere")
	}
	for _, asset := range []string{"/ui/app.js", "/ui/style.css"} {
		res, body := get(t, h, asset)
		require.Equal(t, http.StatusOK, res.StatusCode, asset)
		require.NotContains(t, string(body), "http://", asset)
		require.NotContains(t, string(body), "https://", asset)
	}
	res, _ = get(t, h, "/nothing")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
