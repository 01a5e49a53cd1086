package swim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"time"
	"unsafe"

	"github.com/swim-go/swim/internal/wire"
)

// Registry interns member identities for the Machines that share it. It is
// not safe for concurrent use: Machines sharing a Registry must be driven
// from one goroutine, as a simulator does. Names and versions no Machine
// holds any more are freed and their ids reused, so a long-running member
// with a private Registry does not grow with churn.
//
// A process running many members, each with a private Registry, holds N²
// identities, so nothing here is stored behind a pointer per name or per
// version: names and metadata live in two byte arenas, addresses in a
// pointer-free form, and the indexes are maps of fixed-size keys. The
// garbage collector then has a handful of objects to trace per Registry,
// not several per member; at 4,096 members in one process the difference
// is some 40 million objects (docs/figures.md, "Table memory").
type Registry struct {
	// byHash finds a name's id by its hash, seeded per Registry so that
	// names chosen by a peer cannot be made to collide; the rare name
	// whose hash another name already holds goes to collided.
	seed     maphash.Seed
	byHash   map[uint64]uint32
	collided map[string]uint32
	live     int

	// byAddr maps an address to the name last seen at it, to recognize
	// the sender of any packet (Geode's heartbeat). Machines check the
	// answer against their own view. Addresses with an IPv6 zone, which an
	// addrKey cannot hold, are in byZoned.
	byAddr4 map[uint64]uint32
	byAddr  map[[3]uint64]uint32
	byZoned map[netip.AddrPort]uint32

	// per name id
	names    arena
	nameAt   []uint64 // span of the name in names
	ringKeys []uint64
	nameRefs []uint32 // Machines with an entry for the name
	verHead  []uint32 // first version of the name, 0 if none
	freeIDs  []uint32

	// per version (1-based; 0 means none)
	metas    arena
	verAddr  []addrKey
	verZone  map[uint32]string // zones of the versions that have one
	verMeta  []uint64          // span of the metadata in metas
	verVers  []wire.Versions   // what the member announced it speaks, zero if not known
	verLife  []uint64          // the life (lives.go), zero if not known
	verName  []uint32
	verNext  []uint32 // next version of the same name
	verRefs  []uint32 // entries pointing at the version
	freeVers []uint32
	maxVers  int // maxVersions; lower in tests, which cannot fill 2^24
}

// maxVersions bounds the versions alive at once: an entry packs its version
// into 24 bits.
const maxVersions = 1<<24 - 1

// ErrRegistryFull is returned by Registry.NewMachine when the Registry holds
// as many member versions as it can.
var ErrRegistryFull = errors.New("swim: registry holds its most member versions")

// versionsFull reports whether a new entry must be refused. A Machine's own
// table is bounded by MaxMembers, but Machines sharing a Registry could
// together reach the bound with members a peer made up; one version is
// kept back for setIdentity, which takes the new version before it lets
// the old one go.
func (r *Registry) versionsFull() bool {
	inUse := len(r.verAddr) - 1 - len(r.freeVers)
	return inUse >= r.maxVers-1
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{
		seed:    maphash.MakeSeed(),
		byHash:  make(map[uint64]uint32),
		byAddr4: make(map[uint64]uint32),
		byAddr:  make(map[[3]uint64]uint32),
		verAddr: make([]addrKey, 1),
		verMeta: make([]uint64, 1),
		verVers: make([]wire.Versions, 1),
		verLife: make([]uint64, 1),
		verName: make([]uint32, 1),
		verNext: make([]uint32, 1),
		verRefs: make([]uint32, 1),
		maxVers: maxVersions,
	}
}

// NewMachine is like the package's NewMachine, with the Machine's member
// identities kept in r.
func (r *Registry) NewMachine(cfg *Config, addr netip.AddrPort, rng *rand.Rand, now time.Time, opts ...MachineOption) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := machineSignatures(cfg, now); err != nil {
		return nil, err
	}
	if r.versionsFull() {
		return nil, ErrRegistryFull
	}
	m := &Machine{}
	m.init(cfg, r, addr, rng, now)
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// Names counts the member names interned (for memory accounting).
func (r *Registry) Names() int { return r.live }

// name returns the name of id. The string shares the arena's bytes, which
// are never written again once added, so it stays valid after the name is
// freed or the arena compacted.
func (r *Registry) name(id uint32) string {
	b := r.names.bytes(r.nameAt[id], nameLenBits)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (r *Registry) lookup(name string) (uint32, bool) {
	return r.find(maphash.String(r.seed, name), name)
}

// lookupBytes is lookup for a name still in a packet, without copying it.
func (r *Registry) lookupBytes(name []byte) (uint32, bool) {
	return r.find(maphash.Bytes(r.seed, name), unsafe.String(unsafe.SliceData(name), len(name)))
}

// find looks name up under its hash h. name is only compared, never kept.
func (r *Registry) find(h uint64, name string) (uint32, bool) {
	if id, ok := r.byHash[h]; ok && r.name(id) == name {
		return id, true
	}
	if len(r.collided) > 0 {
		id, ok := r.collided[name]
		return id, ok
	}
	return 0, false
}

// acquireName returns the id of name, interning it, and counts one more
// holder.
func (r *Registry) acquireName(name string) uint32 {
	h := maphash.String(r.seed, name)
	id, ok := r.find(h, name)
	if !ok {
		// add only reads the bytes: no copy of the name is needed.
		span := r.names.add(unsafe.Slice(unsafe.StringData(name), len(name)), nameLenBits)
		if n := len(r.freeIDs); n > 0 {
			id = r.freeIDs[n-1]
			r.freeIDs = r.freeIDs[:n-1]
			r.nameAt[id] = span
			r.ringKeys[id] = ringKeyOf(name)
		} else {
			id = uint32(len(r.nameAt))
			r.nameAt = append(r.nameAt, span)
			r.ringKeys = append(r.ringKeys, ringKeyOf(name))
			r.nameRefs = append(r.nameRefs, 0)
			r.verHead = append(r.verHead, 0)
		}
		if _, taken := r.byHash[h]; taken {
			if r.collided == nil {
				r.collided = make(map[string]uint32)
			}
			r.collided[r.name(id)] = id
		} else {
			r.byHash[h] = id
		}
		r.live++
	}
	r.nameRefs[id]++
	return id
}

func (r *Registry) releaseName(id uint32) {
	r.nameRefs[id]--
	if r.nameRefs[id] > 0 {
		return
	}
	name := r.name(id)
	if h := maphash.String(r.seed, name); r.byHash[h] == id {
		delete(r.byHash, h)
	} else {
		delete(r.collided, name)
	}
	r.names.free(r.nameAt[id], nameLenBits)
	r.nameAt[id] = 0
	r.freeIDs = append(r.freeIDs, id)
	r.live--
	if r.names.wasteful() {
		r.names.compact(r.nameAt, r.nameRefs, nameLenBits)
	}
}

// acquireVersion returns the version of name id at (addr, meta, vers,
// life), creating it if no holder has it yet, and counts one more holder.
func (r *Registry) acquireVersion(id uint32, addr netip.AddrPort, meta []byte, vers wire.Versions, life uint64) uint32 {
	for v := r.verHead[id]; v != 0; v = r.verNext[v] {
		if r.sameVersion(v, addr, meta, vers, life) {
			r.verRefs[v]++
			return v
		}
	}
	var v uint32
	if n := len(r.freeVers); n > 0 {
		v = r.freeVers[n-1]
		r.freeVers = r.freeVers[:n-1]
	} else {
		if len(r.verAddr) > r.maxVers {
			// Not reachable from the network: new entries are refused
			// while versionsFull, which leaves the one version
			// setIdentity takes before releasing the old.
			panic(fmt.Sprintf("swim: over %d member versions in one registry", r.maxVers))
		}
		v = uint32(len(r.verAddr))
		r.verAddr = append(r.verAddr, addrKey{})
		r.verMeta = append(r.verMeta, 0)
		r.verVers = append(r.verVers, wire.Versions{})
		r.verLife = append(r.verLife, 0)
		r.verName = append(r.verName, 0)
		r.verNext = append(r.verNext, 0)
		r.verRefs = append(r.verRefs, 0)
	}
	r.verAddr[v], r.verMeta[v], r.verName[v], r.verRefs[v] = keyOfAddr(addr), r.metas.add(meta, metaLenBits), id, 1
	r.verVers[v], r.verLife[v] = vers, life
	r.verNext[v], r.verHead[id] = r.verHead[id], v
	if zone := addr.Addr().Zone(); zone != "" {
		if r.verZone == nil {
			r.verZone = make(map[uint32]string)
		}
		r.verZone[v] = zone
	}
	r.setIDAt(addr, id)
	return v
}

func (r *Registry) releaseVersion(v uint32) {
	r.verRefs[v]--
	if r.verRefs[v] > 0 {
		return
	}
	id, addr := r.verName[v], r.addr(v)
	// Unlink it from its name's list.
	if r.verHead[id] == v {
		r.verHead[id] = r.verNext[v]
	} else {
		for p := r.verHead[id]; p != 0; p = r.verNext[p] {
			if r.verNext[p] == v {
				r.verNext[p] = r.verNext[v]
				break
			}
		}
	}
	if at, ok := r.idAt(addr); ok && at == id && !r.hasAddr(id, addr) {
		r.clearIDAt(addr)
	}
	delete(r.verZone, v)
	r.metas.free(r.verMeta[v], metaLenBits)
	r.verAddr[v], r.verMeta[v], r.verNext[v], r.verVers[v], r.verLife[v] = addrKey{}, 0, 0, wire.Versions{}, 0
	r.freeVers = append(r.freeVers, v)
	if r.metas.wasteful() {
		r.metas.compact(r.verMeta, r.verRefs, metaLenBits)
	}
}

// addr returns the address of version v.
func (r *Registry) addr(v uint32) netip.AddrPort {
	a := r.verAddr[v].addrPort()
	if r.verZone != nil {
		if zone, ok := r.verZone[v]; ok {
			a = netip.AddrPortFrom(a.Addr().WithZone(zone), a.Port())
		}
	}
	return a
}

// meta returns the metadata of version v, nil if it has none. The bytes are
// shared: callers must not change them.
func (r *Registry) meta(v uint32) []byte { return r.metas.bytes(r.verMeta[v], metaLenBits) }

// sameVersion reports whether version v is (addr, meta, vers, life).
func (r *Registry) sameVersion(v uint32, addr netip.AddrPort, meta []byte, vers wire.Versions, life uint64) bool {
	return r.verVers[v] == vers && r.verLife[v] == life && r.sameAddr(v, addr) && bytes.Equal(r.meta(v), meta)
}

func (r *Registry) sameAddr(v uint32, addr netip.AddrPort) bool {
	if r.verAddr[v] != keyOfAddr(addr) {
		return false
	}
	if r.verZone == nil {
		return addr.Addr().Zone() == ""
	}
	return r.verZone[v] == addr.Addr().Zone()
}

// idAt returns the name last seen at addr; setIDAt and clearIDAt keep the
// index, which is byZoned for an address with a zone, byAddr4 for IPv4 and
// byAddr for the rest.
func (r *Registry) idAt(addr netip.AddrPort) (uint32, bool) {
	var id uint32
	var ok bool
	switch v4, other, kind := r.addrIndex(addr); kind {
	case indexZoned:
		id, ok = r.byZoned[addr]
	case index4:
		id, ok = r.byAddr4[v4]
	default:
		id, ok = r.byAddr[other]
	}
	return id, ok
}

func (r *Registry) setIDAt(addr netip.AddrPort, id uint32) {
	switch v4, other, kind := r.addrIndex(addr); kind {
	case indexZoned:
		if r.byZoned == nil {
			r.byZoned = make(map[netip.AddrPort]uint32)
		}
		r.byZoned[addr] = id
	case index4:
		r.byAddr4[v4] = id
	default:
		r.byAddr[other] = id
	}
}

func (r *Registry) clearIDAt(addr netip.AddrPort) {
	switch v4, other, kind := r.addrIndex(addr); kind {
	case indexZoned:
		delete(r.byZoned, addr)
	case index4:
		delete(r.byAddr4, v4)
	default:
		delete(r.byAddr, other)
	}
}

// The indexes of addresses.
const (
	indexOther = iota
	index4
	indexZoned
)

// addrIndex tells which index holds addr, and its key there.
func (r *Registry) addrIndex(addr netip.AddrPort) (v4 uint64, other [3]uint64, kind int) {
	v4, other, is4 := keyOfAddr(addr).index()
	switch {
	case is4: // an IPv4 address has no zone
		return v4, other, index4
	case addr.Addr().Zone() != "":
		return 0, other, indexZoned
	}
	return v4, other, indexOther
}

func (r *Registry) hasAddr(id uint32, addr netip.AddrPort) bool {
	for v := r.verHead[id]; v != 0; v = r.verNext[v] {
		if r.sameAddr(v, addr) {
			return true
		}
	}
	return false
}

// addrKey is a netip.AddrPort without its zone, in a form with no pointer
// (netip.Addr holds one, to its zone): an IPv4 address in lo, an IPv6 one
// in hi and lo.
type addrKey struct {
	hi, lo uint64
	port   uint16
	fam    uint8 // 0: no address; 4; 6
}

func keyOfAddr(a netip.AddrPort) addrKey {
	switch ip := a.Addr(); {
	case ip.Is4():
		b := ip.As4()
		return addrKey{lo: uint64(binary.BigEndian.Uint32(b[:])), port: a.Port(), fam: 4}
	case ip.Is6():
		b := ip.As16()
		return addrKey{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:]), port: a.Port(), fam: 6}
	}
	return addrKey{port: a.Port()}
}

func (k addrKey) addrPort() netip.AddrPort {
	switch k.fam {
	case 4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(k.lo))
		return netip.AddrPortFrom(netip.AddrFrom4(b), k.port)
	case 6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], k.hi)
		binary.BigEndian.PutUint64(b[8:], k.lo)
		return netip.AddrPortFrom(netip.AddrFrom16(b), k.port)
	}
	return netip.AddrPortFrom(netip.Addr{}, k.port)
}

// index is k as a map key: one word for an IPv4 address, the commonest,
// which maps hash fastest; three otherwise. Both are plain memory, with no
// padding for the hash to skip.
func (k addrKey) index() (v4 uint64, other [3]uint64, is4 bool) {
	if k.fam == 4 {
		return k.lo<<16 | uint64(k.port), [3]uint64{}, true
	}
	return 0, [3]uint64{k.hi, k.lo, uint64(k.fam)<<16 | uint64(k.port)}, false
}

// Spans pack an offset into an arena and a length into one word: names are
// at most wire.MaxNameLen bytes, metadata at most wire.MaxMetaLen.
const (
	nameLenBits = 8
	metaLenBits = 17
)

// Both widths hold the longest the wire decodes (and Validate allows):
// these fail to compile if a limit outgrows its span, which would make
// add's panic reachable from a packet.
const (
	_ = uint(1<<nameLenBits - 1 - wire.MaxNameLen)
	_ = uint(1<<metaLenBits - 1 - wire.MaxMetaLen)
)

// arena holds byte strings back to back. It only appends: bytes once added
// are never written again, so slices and strings of them may be handed out.
// Freed bytes are counted, and the owner moves the live ones to a new arena
// once they are mostly waste.
type arena struct {
	buf  []byte
	dead int
}

// add appends b and returns its span; the empty string is span 0.
func (a *arena) add(b []byte, lenBits uint) uint64 {
	if len(b) == 0 {
		return 0
	}
	if len(b) >= 1<<lenBits {
		// Not reachable from the network: the decoder refuses names and
		// metadata over the wire limits, which fit the spans (checked at
		// compile time above), and Validate the local ones.
		panic(fmt.Sprintf("swim: %d bytes do not fit a span of %d length bits", len(b), lenBits))
	}
	off := uint64(len(a.buf))
	a.buf = append(a.buf, b...)
	return off<<lenBits | uint64(len(b))
}

func (a *arena) bytes(span uint64, lenBits uint) []byte {
	n := span & (1<<lenBits - 1)
	if n == 0 {
		return nil
	}
	off := span >> lenBits
	return a.buf[off : off+n : off+n]
}

func (a *arena) free(span uint64, lenBits uint) { a.dead += int(span & (1<<lenBits - 1)) }

// compact moves the strings still in use, those of spans whose refs are
// not zero, to a new buffer and rewrites their spans. Strings and slices
// handed out keep the old buffer alive for as long as they are held.
func (a *arena) compact(spans []uint64, refs []uint32, lenBits uint) {
	fresh := arena{buf: make([]byte, 0, len(a.buf)-a.dead)}
	for i, span := range spans {
		if refs[i] > 0 {
			spans[i] = fresh.add(a.bytes(span, lenBits), lenBits)
		}
	}
	*a = fresh
}

// wasteful reports whether over half the arena, and over 64 KiB, is freed
// bytes: compacting then costs about what was added since the last time.
func (a *arena) wasteful() bool { return a.dead > 64<<10 && 2*a.dead > len(a.buf) }
