package swim

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func gateNames[C any](gates []gate[C]) string {
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = g.name
	}
	return strings.Join(names, ", ")
}

// TestGateOrder holds the order of the gates of each kind of claim: a
// reordering shows as a diff here, to be made on purpose.
func TestGateOrder(t *testing.T) {
	got := fmt.Sprintf("alive: %s\nsuspect: %s\ndead: %s\n",
		gateNames(aliveGates), gateNames(suspectGates), gateNames(deadGates))
	t.Log("\n" + got)
	want := "alive: size, own life, own name, news, signature, key binding, other life, versions word, versions, stale, address, " +
		"name text, tombstone, capacity, newcomer, admit, move, admit change\n" +
		"suspect: own name, other life, echo, older than alive, unknown, stale, repeat, signature\n" +
		"dead: own name, other life, echo, unknown, stale, signature, member's word\n"
	require.Equal(t, want, got)
}

// listGates renders gates as docs/security.md lists them.
func listGates[C any](b *strings.Builder, title string, gates []gate[C]) {
	fmt.Fprintf(b, "%s\n\n", title)
	for i, g := range gates {
		fmt.Fprintf(b, "%d. `%s`: %s.\n", i+1, g.name, g.doc)
	}
	b.WriteString("\n")
}

// gateListDoc is the list of the gates of each kind that
// docs/security.md holds.
func gateListDoc() string {
	var b strings.Builder
	listGates(&b, "An alive claim:", aliveGates)
	listGates(&b, "A suspect claim:", suspectGates)
	listGates(&b, "A dead or left claim:", deadGates)
	return b.String()
}

// TestGateListInDocs holds docs/security.md's list of the gates to the
// code's: the same names, in the same order, with the same words.
func TestGateListInDocs(t *testing.T) {
	doc, err := os.ReadFile("docs/security.md")
	require.NoError(t, err)
	want := gateListDoc()
	require.True(t, strings.Contains(string(doc), want),
		"docs/security.md (The gates of a claim) must list the gates as the code does:\n\n%s", want)
}

// TestGateDocsAreOneLine keeps each gate's doc to one sentence without a
// final period, as the docs list prints them.
func TestGateDocsAreOneLine(t *testing.T) {
	var docs []string
	for _, g := range aliveGates {
		docs = append(docs, g.doc)
	}
	for _, g := range suspectGates {
		docs = append(docs, g.doc)
	}
	for _, g := range deadGates {
		docs = append(docs, g.doc)
	}
	for _, d := range docs {
		require.NotEmpty(t, d)
		require.NotContains(t, d, "\n")
		require.False(t, strings.HasSuffix(d, "."), "%q", d)
	}
}
