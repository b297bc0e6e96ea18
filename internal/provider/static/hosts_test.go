package static

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// writeKey writes an ed25519 private key in OpenSSH's format (with a passphrase when given).
func writeKey(t *testing.T, path, passphrase string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadHostsFile(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, filepath.Join(dir, "id_ed25519"), "")
	writeKey(t, filepath.Join(dir, "locked"), "secret")
	os.WriteFile(filepath.Join(dir, "notakey"), []byte("hello\n"), 0o600)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// YAML, defaults filled in, the key made absolute.
	inv, err := Load(write("hosts.yaml", `Hosts:
- Address: 10.0.0.11
  KeyFile: id_ed25519
  InstanceType: ml.p5.48xlarge
  Labels: {rack: r12}
- Address: gpu-2.example.com
  Port: 2222
  User: admin
  KeyFile: id_ed25519
`))
	if err != nil {
		t.Fatal(err)
	}
	if h := inv.Hosts[0]; h.Port != 22 || h.User != "root" || h.KeyFile != filepath.Join(dir, "id_ed25519") || h.Labels["rack"] != "r12" {
		t.Errorf("first host: %+v", h)
	}
	// JSON is the same document.
	if _, err := Load(write("hosts.json", `{"Hosts": [{"Address": "10.0.0.11", "KeyFile": "id_ed25519"}]}`)); err != nil {
		t.Errorf("JSON: %v", err)
	}

	// Each fault names its entry; all of them in one error.
	_, err = Load(write("bad.yaml", `Hosts:
- {Address: 10.0.0.11, KeyFile: id_ed25519}
- {Address: 10.0.0.11, KeyFile: id_ed25519, Port: 2222}
- {Address: 10.0.0.12, KeyFile: id_ed25519, InstanceType: p5.48xlarge}
- {Address: 10.0.0.13, KeyFile: missing}
- {Address: 10.0.0.14, KeyFile: notakey}
- {Address: 10.0.0.15, KeyFile: locked}
- {Address: "bad host!", KeyFile: id_ed25519, Port: 70000}
- {Address: 10.0.0.16, KeyFile: id_ed25519, Labels: {"bad key!": x}}
`))
	if err == nil {
		t.Fatal("a bad hosts file was accepted")
	}
	for _, want := range []string{
		"bad.yaml: ",
		"Hosts[1] (10.0.0.11): Address 10.0.0.11 is already Hosts[0]",
		`Hosts[2] (10.0.0.12): InstanceType "p5.48xlarge" is not a SageMaker HyperPod instance type`,
		"Hosts[3] (10.0.0.13): KeyFile: open " + filepath.Join(dir, "missing"),
		"Hosts[4] (10.0.0.14): KeyFile " + filepath.Join(dir, "notakey") + " is not an SSH private key",
		"Hosts[5] (10.0.0.15): KeyFile " + filepath.Join(dir, "locked") + " is protected by a passphrase",
		`Hosts[6] (bad host!): Address "bad host!" is neither an IP address nor a DNS name`,
		"Hosts[6] (bad host!): Port 70000 is not in 1-65535",
		`Hosts[7] (10.0.0.16): Labels: key "bad key!"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Hosts[0]") && strings.Contains(err.Error(), "Hosts[0] (") {
		t.Errorf("a good entry is blamed:\n%v", err)
	}

	for name, body := range map[string]string{
		"empty.yaml":   "Hosts: []\n",
		"unknown.yaml": "Hosts:\n- {Address: 10.0.0.1, KeyFile: id_ed25519, Passwd: x}\n",
	} {
		if _, err := Load(write(name, body)); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}
