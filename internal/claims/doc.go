// Package claims is signed claims: what a member says about itself, only
// it can say (docs/security.md, "Signed claims"). It is pure, as the
// Machine that drives it: no I/O, no lock, no clock (every input that
// needs the time carries now) and no randomness, which the swim package's
// TestRoomsArePure holds it to. There is one Table per member, owned by
// its Machine, which asks it at the gates of each claim and counts what it
// refused (Stats).
//
// The rules it implements:
//
//   - What is signed, and by whom (AppendAlive, AppendLeave,
//     AppendAccusation): a member signs its alive (address, metadata,
//     incarnation, versions, life and its own public key; its refutation
//     is an alive, SWIM §4.2) and its leave; an accusation (suspect or
//     dead, SWIM §4.2) is signed by its accuser. Each kind is signed under
//     its own tag, after a domain and the cluster label, so that no
//     signature passes for another kind, another cluster or anything else
//     the key signs. Claims are relayed with their author's signature,
//     unchanged (Table.ProveOwn, AttachHeld, LeaveSig, AccusationSig).
//   - A name is bound to one key (Table.Bound): without an authority, the
//     first key seen with it (trust on first use); a claim under another
//     key is taken only for a new life of the name, which the caller then
//     checks with the life that holds it (Table.ProveAlive). With an
//     authority (trusted roots), a claim needs a certificate of one of the
//     roots binding its name to its key, unexpired (certificate.go).
//   - Modes (ModeOff, ModeSign, ModeRequired), switched one member at a
//     time: with ModeSign an unsigned claim is taken about a member not
//     known to sign; with ModeRequired never about another member. A
//     claim whose signature is wrong is dropped in both (Claims.Forged).
//   - Verified once, when news: the caller drops stale copies before
//     asking, and a digest of every claim verified (at most maxVerified)
//     makes the copies gossip and push-pulls bring again cost a hash.
//   - Accusations are accountable: each is counted once per accuser, and
//     each accuser's are bounded by a bucket (AccuserBurst at once, one
//     more per AccuserEvery probe intervals), so that no accuser crowds
//     out the others' news; a member probes one member per protocol period
//     (SWIM §4.3), so an honest accuser stays well inside the bound.
//   - Proofs where they are news: the Table tells which proofs were kept
//     in this member's last RecentExchanges push-pulls (Recent) and which
//     names were bound lately (BoundLately), from which the push-pull
//     chooses the entries that carry their proof.
//
// A joiner's own entry is checked at the seed before its join is taken
// (Table.CheckJoiner): signed where signatures are required, certified
// where there is an authority; the error is the reason the joiner is told.
package claims
