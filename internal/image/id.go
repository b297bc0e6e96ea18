package image

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
)

// Default is the ImageId that names hale's default image (DefaultSpec, built once per machine in
// DefaultDir): the root the local provider's nodes of groups with no ImageId boot from, or the
// host's own root where it is not built (docs/images.md).
const Default = "default"

// idPattern is the API's ImageId pattern (sagemaker-cluster-shapes.json, shape ImageId:
// `ami-[0-9a-fA-F]{8,17}|default`), anchored.
var idPattern = regexp.MustCompile(`^(ami-[0-9a-fA-F]{8,17}|default)$`)

// NewID returns a fresh image id: "ami-" and 17 lowercase hexadecimal digits, as EC2 gives
// AMIs since 2018, so every id hale makes passes the API's ImageId pattern.
func NewID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return "ami-" + hex.EncodeToString(b)[:17]
}

// ValidID reports whether id passes the API's ImageId pattern ("default" included).
func ValidID(id string) bool { return idPattern.MatchString(id) }
