package certificate_test

import (
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/swim-go/swim/certificate"
)

// The cluster's authority certifies a member's identity key for its name;
// the member runs with the certificate in Config.Claims.Certificate and the
// authority's public key in Config.Claims.TrustedRoots.
func Example() {
	rootPub, root, _ := ed25519.GenerateKey(nil)
	// The member's identity: its private key stays with it.
	pub, _, _ := ed25519.GenerateKey(nil)
	notAfter := time.Now().Add(30 * 24 * time.Hour)
	cert, err := certificate.New(root, "node-1", pub, notAfter)
	if err != nil {
		panic(err)
	}
	err = certificate.Verify(cert, "node-1", pub, []ed25519.PublicKey{rootPub}, time.Now())
	fmt.Println(err)
	// Output: <nil>
}
